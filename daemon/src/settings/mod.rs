//! The daemon's settings: one [`Settings`] value, built once at start from
//! the `drsd` flags, the environment and the settings file
//! (`$XDG_CONFIG_HOME/drsd/config.toml`, or the one `--config` or
//! `DRSD_CONFIG` names), in that order of precedence, per setting. It is
//! passed down to whoever reads a setting (the config, the S3 credential
//! chain, the HTTP and DRS clients), so nothing else reads the environment
//! for a setting, and a test builds one of its own.
//!
//! Every value is checked here, when the daemon starts: an unknown key or a
//! value of the wrong kind is an error naming the file (or the variable),
//! the key and what is accepted, so a typo is never silently ignored.
//! Secrets (the S3 secret key and session token) are never shown: not in
//! `Debug`, errors, logs or `drsctl config`.
//!
//! The socket is not a setting here: clients must find it before they can
//! ask the daemon anything, so it stays `--socket` / `DRSD_SOCKET`.

pub mod env;
mod file;
mod keys;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use drsd_proto::{ConfigReport, SettingLine, SettingSource, SECRET_SHOWN};

pub use keys::{spec, Key, Kind, Spec, SPECS};

/// A setting's value, checked against its [`Kind`].
#[derive(Clone, PartialEq)]
pub enum Value {
    /// A count or a size in bytes.
    Number(u64),
    Secs(Duration),
    Path(PathBuf),
    /// Text, a URL, a DRS server map.
    Text(String),
    Bool(bool),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Number(n) => write!(f, "{n}"),
            Value::Secs(d) => write!(f, "{}", d.as_secs_f64()),
            Value::Path(p) => write!(f, "{}", p.display()),
            Value::Text(t) => f.write_str(t),
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag(&'static str),
    Environment(&'static str),
    File(PathBuf),
}

#[derive(Clone)]
struct Entry {
    value: Value,
    source: Source,
}

/// Which settings file to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileChoice {
    /// None at all (tests, tools).
    None,
    /// One the user named (`--config`, `DRSD_CONFIG`): it must exist.
    Named(PathBuf),
    /// The default one: when missing, the defaults apply.
    Default(PathBuf),
}

/// Every setting in force, and where each came from.
#[derive(Clone, Default)]
pub struct Settings {
    file: Option<PathBuf>,
    file_read: bool,
    entries: BTreeMap<Key, Entry>,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (key, entry) in &self.entries {
            let value = shown(spec(*key), &entry.value);
            map.entry(&spec(*key).dotted(), &(value, &entry.source));
        }
        map.finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("settings file {path}: {why}")]
    File { path: PathBuf, why: String },
    #[error("settings file {path}: key `{key}`: {why}")]
    Key {
        path: PathBuf,
        key: String,
        why: String,
    },
    #[error("environment variable {var}: {why}")]
    Env { var: &'static str, why: String },
}

impl Settings {
    /// The daemon's settings: `flags` over the process's environment over
    /// the settings file `config` names (else `DRSD_CONFIG`, else the default).
    pub fn for_daemon(
        config: Option<PathBuf>,
        flags: &[(Key, Value)],
    ) -> Result<Settings, SettingsError> {
        let env = |name: &str| std::env::var(name).ok();
        let named = config.or_else(|| {
            env(drsd_proto::CONFIG_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        });
        let choice = match (named, drsd_proto::default_config_path()) {
            (Some(path), _) => FileChoice::Named(path),
            (None, Some(path)) => FileChoice::Default(path),
            (None, None) => FileChoice::None,
        };
        Settings::load(choice, env, flags)
    }

    /// The process's environment alone, no file: for tools and tests that
    /// use the library without a daemon.
    pub fn from_env() -> Result<Settings, SettingsError> {
        Settings::load(FileChoice::None, |name| std::env::var(name).ok(), &[])
    }

    /// Variables given as pairs, as if in the environment: for tests.
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let env = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        Settings::load(FileChoice::None, env, &[])
    }

    /// `flags` over `env` over the file, each checked against its kind.
    /// A variable set to the empty string counts as unset.
    pub fn load(
        choice: FileChoice,
        env: impl Fn(&str) -> Option<String>,
        flags: &[(Key, Value)],
    ) -> Result<Settings, SettingsError> {
        let mut settings = Settings::default();
        settings.read_file(choice)?;
        for spec in SPECS {
            let set = spec
                .env
                .iter()
                .find_map(|var| env(var).filter(|v| !v.is_empty()).map(|v| (*var, v)));
            if let Some((var, text)) = set {
                let value = parse_text(spec, &text).map_err(|why| SettingsError::Env {
                    var,
                    why: shown_why(spec, &text, why),
                })?;
                settings.set(spec.key, value, Source::Environment(var));
            }
        }
        // Flags come typed from clap: nothing to check.
        for (key, value) in flags {
            let flag = spec(*key).flag.unwrap_or("a flag");
            settings.set(*key, value.clone(), Source::Flag(flag));
        }
        Ok(settings)
    }

    fn set(&mut self, key: Key, value: Value, source: Source) {
        self.entries.insert(key, Entry { value, source });
    }

    fn read_file(&mut self, choice: FileChoice) -> Result<(), SettingsError> {
        let (path, must_exist) = match choice {
            FileChoice::None => return Ok(()),
            FileChoice::Named(path) => (path, true),
            FileChoice::Default(path) => (path, false),
        };
        self.file = Some(path.clone());
        let Some(read) = file::read(&path)? else {
            if must_exist {
                return Err(SettingsError::File {
                    path,
                    why: "there is no such file".into(),
                });
            }
            return Ok(());
        };
        self.file_read = true;
        for (spec, value) in parse_file(&path, &read.text)? {
            if spec.secret || has_password(spec, &value) {
                file::check_private(&path, read.mode, &spec.dotted())?;
            }
            self.set(spec.key, value, Source::File(path.clone()));
        }
        Ok(())
    }

    /// The settings file looked for, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    pub fn value(&self, key: Key) -> Option<&Value> {
        self.entries.get(&key).map(|e| &e.value)
    }

    pub fn source(&self, key: Key) -> Option<&Source> {
        self.entries.get(&key).map(|e| &e.source)
    }

    /// A count or size.
    pub fn number(&self, key: Key) -> Option<u64> {
        match self.value(key)? {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    pub fn secs(&self, key: Key) -> Option<Duration> {
        match self.value(key)? {
            Value::Secs(d) => Some(*d),
            _ => None,
        }
    }

    pub fn path(&self, key: Key) -> Option<&Path> {
        match self.value(key)? {
            Value::Path(p) => Some(p),
            _ => None,
        }
    }

    pub fn flag(&self, key: Key) -> Option<bool> {
        match self.value(key)? {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn text(&self, key: Key) -> Option<&str> {
        match self.value(key)? {
            Value::Text(t) => Some(t),
            _ => None,
        }
    }

    /// Every setting, its value (a secret as `<set>`) and its source.
    pub fn report(&self) -> ConfigReport {
        let settings = SPECS.iter().map(|spec| self.line(spec)).collect();
        ConfigReport {
            file: self.file.clone(),
            file_read: self.file_read,
            settings,
        }
    }

    fn line(&self, spec: &Spec) -> SettingLine {
        let (value, source) = match self.entries.get(&spec.key) {
            None => (spec.default.to_string(), SettingSource::Default),
            Some(entry) => (shown(spec, &entry.value), wire_source(&entry.source)),
        };
        SettingLine {
            key: spec.dotted(),
            env: spec.env.iter().map(|v| v.to_string()).collect(),
            value,
            secret: spec.secret,
            source,
        }
    }
}

/// A value as `drsctl config`, `Debug` and the log may show it: a secret
/// as `<set>`, a PostgreSQL URL without its password.
fn shown(spec: &Spec, value: &Value) -> String {
    match (spec.secret, spec.kind, value) {
        (true, _, _) => SECRET_SHOWN.to_string(),
        (false, Kind::PgUrl, Value::Text(url)) => crate::pg::PgServer::redacted(url),
        _ => value.to_string(),
    }
}

fn wire_source(source: &Source) -> SettingSource {
    match source {
        Source::Flag(flag) => SettingSource::Flag {
            flag: flag.to_string(),
        },
        Source::Environment(var) => SettingSource::Environment {
            var: var.to_string(),
        },
        Source::File(path) => SettingSource::File { path: path.clone() },
    }
}

/// Why a value is not one of its setting's [`Kind`]; each says what is
/// accepted. The value itself is not in it: [`shown_why`] quotes it where
/// it is no secret.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("it is empty; want {}", .0.accepted())]
    Empty(Kind),
    #[error("want {}", .0.accepted())]
    NotOfKind(Kind),
    #[error("{error}; want {}", .kind.accepted())]
    Url { error: url::ParseError, kind: Kind },
    #[error("entry {:?}: {}; want {}", .error.entry, .error.why, .kind.accepted())]
    DrsServers {
        error: crate::stores::drs::BadDrsServers,
        kind: Kind,
    },
    #[error("a {found} is not accepted; want {}", .kind.accepted())]
    TomlType { found: &'static str, kind: Kind },
}

/// Why a text value was refused, quoting it unless it is a secret.
fn shown_why(spec: &Spec, text: &str, why: Refused) -> String {
    match spec.secret || spec.kind == Kind::PgUrl {
        true => why.to_string(),
        false => format!("{text:?}: {why}"),
    }
}

/// A value from the environment or a flag, checked against its kind.
fn parse_text(spec: &Spec, text: &str) -> Result<Value, Refused> {
    let kind = spec.kind;
    let want = || Refused::NotOfKind(kind);
    let text = text.trim();
    if text.is_empty() {
        return Err(Refused::Empty(kind));
    }
    Ok(match spec.kind {
        Kind::Count => Value::Number(text.parse().map_err(|_| want())?),
        Kind::Size => Value::Number(parse_size(text).ok_or_else(want)?),
        Kind::Secs => Value::Secs(parse_secs(text).ok_or_else(want)?),
        Kind::Path => Value::Path(PathBuf::from(text)),
        Kind::Url => {
            let url = url::Url::parse(text).map_err(|error| Refused::Url { error, kind })?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(want());
            }
            Value::Text(text.to_string())
        }
        Kind::DrsServers => {
            crate::stores::drs::DrsServers::parse(text)
                .map_err(|error| Refused::DrsServers { error, kind })?;
            Value::Text(text.to_string())
        }
        Kind::Text => Value::Text(text.to_string()),
        Kind::Bool => Value::Bool(parse_bool(text).ok_or_else(want)?),
        Kind::PgUrl => {
            // Checked as the client reads it; its own message may quote
            // the password, so only ours is given.
            text.parse::<postgres::Config>().map_err(|_| want())?;
            Value::Text(text.to_string())
        }
    })
}

fn parse_bool(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// A value from the file: numbers may be TOML numbers, sizes strings too.
fn parse_toml(spec: &Spec, value: &toml::Value) -> Result<Value, Refused> {
    let kind = spec.kind;
    let want = || Refused::NotOfKind(kind);
    match (spec.kind, value) {
        (Kind::Count | Kind::Size, toml::Value::Integer(n)) => {
            u64::try_from(*n).map(Value::Number).map_err(|_| want())
        }
        (Kind::Secs, toml::Value::Integer(n)) => u64::try_from(*n)
            .map(|n| Value::Secs(Duration::from_secs(n)))
            .map_err(|_| want()),
        (Kind::Secs, toml::Value::Float(x)) => Duration::try_from_secs_f64(*x)
            .map(Value::Secs)
            .map_err(|_| want()),
        (Kind::Bool, toml::Value::Boolean(b)) => Ok(Value::Bool(*b)),
        (
            Kind::Size | Kind::Path | Kind::Url | Kind::DrsServers | Kind::Text | Kind::PgUrl,
            toml::Value::String(s),
        ) => {
            // The text's own problem, without quoting it (it may be a secret).
            parse_text(spec, s).map_err(|why| match spec.secret {
                true => want(),
                false => why,
            })
        }
        (_, other) => Err(Refused::TomlType {
            found: other.type_str(),
            kind,
        }),
    }
}

/// Whether `value` is a PostgreSQL URL with a password in it: then the
/// file holding it must be private, as for any secret.
fn has_password(spec: &Spec, value: &Value) -> bool {
    match (spec.kind, value) {
        (Kind::PgUrl, Value::Text(url)) => url
            .parse::<postgres::Config>()
            .is_ok_and(|c| c.get_password().is_some()),
        _ => false,
    }
}

/// Every key of the file, checked; unknown keys refused by name.
fn parse_file(path: &Path, text: &str) -> Result<Vec<(&'static Spec, Value)>, SettingsError> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| SettingsError::File {
            path: path.to_path_buf(),
            // The message alone: toml's own rendering quotes the line, which
            // may hold a secret.
            why: format!(
                "it is not valid TOML: {}{}",
                e.message().trim(),
                line_of(text, &e)
            ),
        })?;
    let mut found = Vec::new();
    for (name, value) in &table {
        match (known(None, name), value) {
            (Some(spec), _) => found.push((spec, key_value(path, spec, value)?)),
            (None, toml::Value::Table(inner)) if is_table(name) => {
                for (inner_name, value) in inner {
                    let spec = known(Some(name), inner_name)
                        .ok_or_else(|| unknown(path, &format!("{name}.{inner_name}")))?;
                    found.push((spec, key_value(path, spec, value)?));
                }
            }
            (None, _) if is_table(name) => {
                return Err(SettingsError::Key {
                    path: path.to_path_buf(),
                    key: name.clone(),
                    why: format!("want a table ([{name}])"),
                })
            }
            (None, _) => return Err(unknown(path, name)),
        }
    }
    Ok(found)
}

fn key_value(path: &Path, spec: &Spec, value: &toml::Value) -> Result<Value, SettingsError> {
    parse_toml(spec, value).map_err(|why| SettingsError::Key {
        path: path.to_path_buf(),
        key: spec.dotted(),
        why: why.to_string(),
    })
}

fn known(table: Option<&str>, name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.table == table && s.name == name)
}

fn is_table(name: &str) -> bool {
    SPECS.iter().any(|s| s.table == Some(name))
}

fn unknown(path: &Path, key: &str) -> SettingsError {
    let keys: Vec<String> = SPECS.iter().map(Spec::dotted).collect();
    SettingsError::Key {
        path: path.to_path_buf(),
        key: key.to_string(),
        why: format!("no such setting; the settings are: {}", keys.join(", ")),
    }
}

/// ` (line N)` where toml placed the error.
fn line_of(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|b| **b == b'\n').count() + 1;
            format!(" (line {line})")
        }
        None => String::new(),
    }
}

/// `123`, `64K`, `50M`, `2G` (powers of 1024).
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, shift) = match text.chars().last()?.to_ascii_uppercase() {
        'K' => (&text[..text.len() - 1], 10),
        'M' => (&text[..text.len() - 1], 20),
        'G' => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

fn parse_secs(text: &str) -> Option<Duration> {
    Duration::try_from_secs_f64(text.parse().ok()?).ok()
}
