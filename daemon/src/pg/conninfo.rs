//! A team database's connection read as libpq reads it, so that the URL a
//! lab writes for `psql` works for drsd unchanged: a `postgresql://` URL or
//! `key=value` pairs; a `service` (in the URL or `PGSERVICE`) looked up in
//! `PGSERVICEFILE` or `~/.pg_service.conf`, then in
//! `PGSYSCONFDIR/pg_service.conf`; the `PG…` variables for what neither
//! names; and the password, when none is given, from `PGPASSWORD` or the
//! password file (`PGPASSFILE` or `~/.pgpass`), which, as libpq does, is
//! ignored when its group or others may read it. The order is libpq's: the
//! connection string, then the service, then the variables.
//!
//! TLS differs from libpq on purpose: every TLS connection is verified as
//! libpq's `verify-full` (the chain against the roots, the host name), so
//! `require` and `verify-ca` are as strict as `verify-full`, and `allow` is
//! `prefer`. A lab with its own certificate authority names it with
//! `sslrootcert` (or the daemon's `ca_file` setting).
//!
//! The `postgres` crate parses the string itself but knows neither
//! services, password files nor `sslrootcert`, and refuses the sslmodes it
//! does not implement: those are taken out and applied here.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use postgres::config::{Host, SslMode};

/// Keys this module takes out of the string before `postgres` parses it.
const OURS: [&str; 3] = ["service", "sslrootcert", "sslmode"];
const DEFAULT_PORT: u16 = 5432;
/// Debian's `PGSYSCONFDIR` when the variable is unset.
const DEFAULT_SYSCONFDIR: &str = "/etc/postgresql-common";

/// Why a connection string could not be read: each names what it read.
#[derive(Debug, thiserror::Error)]
pub enum ConnInfoError {
    #[error("the team database URL is not a PostgreSQL connection string: {0}")]
    Parse(#[source] postgres::Error),
    #[error("the PostgreSQL service {service:?} is in no service file (looked in {looked})")]
    NoService { service: String, looked: String },
    #[error("reading the PostgreSQL service file {path}: {source}")]
    ServiceFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{at}: {key}={value:?} is not a value drsd can take for a PostgreSQL connection")]
    BadValue {
        at: String,
        key: String,
        value: String,
    },
    #[error("{at}: the PostgreSQL connection setting {key:?} is not one drsd takes (host, hostaddr, port, dbname, user, password, sslmode, sslrootcert, connect_timeout, application_name, options)")]
    UnknownKey { at: String, key: String },
}

/// A connection read: the `postgres` crate's config, and the extra root
/// certificate `sslrootcert` names.
pub struct ConnInfo {
    pub config: postgres::Config,
    pub root_cert: Option<PathBuf>,
}

/// What the process environment gives: its variables and the home folder.
pub trait Environment {
    fn var(&self, name: &str) -> Option<String>;
    fn home(&self) -> Option<PathBuf>;
}

/// The daemon's own environment.
pub struct ProcessEnv;

impl Environment for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
    fn home(&self) -> Option<PathBuf> {
        directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf())
    }
}

impl ConnInfo {
    /// Reads `conninfo` with libpq's conventions (see the module notes).
    pub fn read(conninfo: &str, env: &dyn Environment) -> Result<ConnInfo, ConnInfoError> {
        let (rest, ours) = take_ours(conninfo);
        let mut config = postgres::Config::from_str(&rest).map_err(ConnInfoError::Parse)?;
        let mut info = Settings {
            sslmode: ours.get("sslmode").cloned(),
            root_cert: ours.get("sslrootcert").map(PathBuf::from),
        };
        let service = ours
            .get("service")
            .cloned()
            .or_else(|| env.var("PGSERVICE"));
        if let Some(service) = service {
            for (key, value, at) in service_params(&service, env)? {
                info.fill(&mut config, &key, &value, &at)?;
            }
        }
        for (var, key) in ENV_KEYS {
            if let Some(value) = env.var(var) {
                info.fill(&mut config, key, &value, var)?;
            }
        }
        if config.get_user().is_none() {
            if let Some(user) = env.var("USER") {
                config.user(&user);
            }
        }
        config.ssl_mode(ssl_mode(
            info.sslmode.as_deref().unwrap_or("prefer"),
            "sslmode",
        )?);
        if config.get_password().is_none() {
            if let Some(password) = password_from_file(&config, env) {
                config.password(password);
            }
        }
        Ok(ConnInfo {
            config,
            root_cert: info.root_cert,
        })
    }
}

/// The variables libpq reads for a setting the string does not give.
const ENV_KEYS: [(&str, &str); 10] = [
    ("PGHOST", "host"),
    ("PGHOSTADDR", "hostaddr"),
    ("PGPORT", "port"),
    ("PGDATABASE", "dbname"),
    ("PGUSER", "user"),
    ("PGPASSWORD", "password"),
    ("PGSSLMODE", "sslmode"),
    ("PGSSLROOTCERT", "sslrootcert"),
    ("PGCONNECT_TIMEOUT", "connect_timeout"),
    ("PGAPPNAME", "application_name"),
];

/// The settings `postgres::Config` cannot hold or tell apart from unset.
struct Settings {
    sslmode: Option<String>,
    root_cert: Option<PathBuf>,
}

impl Settings {
    /// Sets `key` to `value` unless the connection string (or a source
    /// read before, which comes first) set it; `at` names the source.
    fn fill(
        &mut self,
        config: &mut postgres::Config,
        key: &str,
        value: &str,
        at: &str,
    ) -> Result<(), ConnInfoError> {
        let bad = || ConnInfoError::BadValue {
            at: at.to_string(),
            key: key.to_string(),
            value: if key == "password" {
                "…".into()
            } else {
                value.to_string()
            },
        };
        match key {
            "host" | "hostaddr" if config.get_hosts().is_empty() => {
                for host in value.split(',') {
                    config.host(host);
                }
            }
            "port" if config.get_ports().is_empty() => {
                for port in value.split(',') {
                    config.port(port.parse().map_err(|_| bad())?);
                }
            }
            "dbname" if config.get_dbname().is_none() => {
                config.dbname(value);
            }
            "user" if config.get_user().is_none() => {
                config.user(value);
            }
            "password" if config.get_password().is_none() => {
                config.password(value);
            }
            "connect_timeout" if config.get_connect_timeout().is_none() => {
                let secs: u64 = value.parse().map_err(|_| bad())?;
                config.connect_timeout(std::time::Duration::from_secs(secs));
            }
            "application_name" if config.get_application_name().is_none() => {
                config.application_name(value);
            }
            "options" if config.get_options().is_none() => {
                config.options(value);
            }
            "sslmode" => {
                ssl_mode(value, at)?;
                self.sslmode.get_or_insert_with(|| value.to_string());
            }
            "sslrootcert" => {
                self.root_cert.get_or_insert_with(|| PathBuf::from(value));
            }
            "host" | "hostaddr" | "port" | "dbname" | "user" | "password" | "connect_timeout"
            | "application_name" | "options" => {}
            _ => {
                return Err(ConnInfoError::UnknownKey {
                    at: at.to_string(),
                    key: key.to_string(),
                })
            }
        }
        Ok(())
    }
}

/// libpq's sslmodes as this client runs them (see the module notes).
fn ssl_mode(value: &str, at: &str) -> Result<SslMode, ConnInfoError> {
    match value {
        "disable" => Ok(SslMode::Disable),
        "allow" | "prefer" => Ok(SslMode::Prefer),
        "require" | "verify-ca" | "verify-full" => Ok(SslMode::Require),
        _ => Err(ConnInfoError::BadValue {
            at: at.to_string(),
            key: "sslmode".into(),
            value: value.to_string(),
        }),
    }
}

/// `conninfo` without the keys of [`OURS`], and their values.
fn take_ours(conninfo: &str) -> (String, BTreeMap<&'static str, String>) {
    let mut ours = BTreeMap::new();
    let trimmed = conninfo.trim();
    if trimmed.starts_with("postgres://") || trimmed.starts_with("postgresql://") {
        let Some((base, query)) = trimmed.split_once('?') else {
            return (trimmed.to_string(), ours);
        };
        let mut kept = url::form_urlencoded::Serializer::new(String::new());
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            match OURS.iter().find(|k| **k == key) {
                Some(k) => {
                    ours.insert(*k, value.into_owned());
                }
                None => {
                    kept.append_pair(&key, &value);
                }
            }
        }
        let kept = kept.finish();
        return match kept.is_empty() {
            true => (base.to_string(), ours),
            false => (format!("{base}?{kept}"), ours),
        };
    }
    // `key=value` pairs: a value of ours is a plain word (a service name,
    // a mode, a path without spaces); quoted ones go to `postgres`, which
    // then refuses the key by name.
    let mut kept = Vec::new();
    for word in trimmed.split_whitespace() {
        let ours_here = word
            .split_once('=')
            .and_then(|(k, v)| OURS.iter().find(|o| **o == k).map(|k| (*k, v)))
            .filter(|(_, v)| !v.starts_with('\''));
        match ours_here {
            Some((key, value)) => {
                ours.insert(key, value.to_string());
            }
            None => kept.push(word),
        }
    }
    (kept.join(" "), ours)
}

/// The settings of `service`: the user's service file first, then the
/// system's; each with the file it came from.
fn service_params(
    service: &str,
    env: &dyn Environment,
) -> Result<Vec<(String, String, String)>, ConnInfoError> {
    let user_file = env
        .var("PGSERVICEFILE")
        .map(PathBuf::from)
        .or_else(|| env.home().map(|h| h.join(".pg_service.conf")));
    let system_file = Path::new(&env.var("PGSYSCONFDIR").unwrap_or(DEFAULT_SYSCONFDIR.into()))
        .join("pg_service.conf");
    let files: Vec<PathBuf> = user_file.into_iter().chain([system_file]).collect();
    for file in &files {
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(ConnInfoError::ServiceFile {
                    path: file.clone(),
                    source,
                })
            }
        };
        if let Some(params) = section(&text, service) {
            let at = format!("service {service:?} in {}", file.display());
            return Ok(params
                .into_iter()
                .map(|(k, v)| (k, v, at.clone()))
                .collect());
        }
    }
    Err(ConnInfoError::NoService {
        service: service.to_string(),
        looked: files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// The `key=value` lines of `[name]` in a service file, or `None` when it
/// has no such section. libpq's format is simpler than INI (no quoting, no
/// continuation; `#` starts a comment line), so it is read as libpq reads
/// it rather than by an INI parser that would accept more.
fn section(text: &str, name: &str) -> Option<Vec<(String, String)>> {
    let mut params = None;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if params.is_some() {
                break;
            }
            if header == name {
                params = Some(Vec::new());
            }
            continue;
        }
        if let (Some(params), Some((k, v))) = (params.as_mut(), line.split_once('=')) {
            params.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    params
}

/// The password of the first line of the password file matching the
/// connection: `host:port:dbname:user:password`, `*` matching anything,
/// `\` escaping `:` and `\`. As libpq does, a file others may read is
/// ignored (with a warning), as is a file that is not there.
fn password_from_file(config: &postgres::Config, env: &dyn Environment) -> Option<String> {
    let path = env
        .var("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| env.home().map(|h| h.join(".pgpass")))?;
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_file() {
        return None;
    }
    if meta.permissions().mode() & 0o077 != 0 {
        log::warn!(
            "the password file {} is readable by others than its owner: ignored (chmod 0600 it)",
            path.display()
        );
        return None;
    }
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            log::warn!(
                "the password file {} could not be read: {e}",
                path.display()
            );
            return None;
        }
    };
    let wanted = Wanted::of(config);
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find_map(|line| wanted.password_in(line))
}

/// What a password file's line must match.
struct Wanted {
    hosts: Vec<String>,
    port: String,
    dbname: String,
    user: String,
}

impl Wanted {
    fn of(config: &postgres::Config) -> Wanted {
        let hosts = config
            .get_hosts()
            .iter()
            .map(|h| match h {
                Host::Tcp(name) => name.clone(),
                // libpq matches a socket connection to `localhost`.
                Host::Unix(_) => "localhost".into(),
            })
            .collect::<Vec<_>>();
        let user = config.get_user().unwrap_or_default().to_string();
        Wanted {
            hosts: match hosts.is_empty() {
                true => vec!["localhost".into()],
                false => hosts,
            },
            port: config
                .get_ports()
                .first()
                .copied()
                .unwrap_or(DEFAULT_PORT)
                .to_string(),
            dbname: config.get_dbname().unwrap_or(&user).to_string(),
            user,
        }
    }

    fn password_in(&self, line: &str) -> Option<String> {
        let fields = split_escaped(line);
        let [host, port, dbname, user, password] = fields.as_slice() else {
            return None;
        };
        let matches = |field: &str, value: &str| field == "*" || field == value;
        let host_ok = host == "*" || self.hosts.iter().any(|h| h == host);
        (host_ok
            && matches(port, &self.port)
            && matches(dbname, &self.dbname)
            && matches(user, &self.user))
        .then(|| password.clone())
    }
}

/// A password file's line cut at unescaped `:`, escapes removed.
fn split_escaped(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    fields.last_mut().expect("one field at least").push(next);
                }
            }
            ':' => fields.push(String::new()),
            c => fields.last_mut().expect("one field at least").push(c),
        }
    }
    fields
}

/// An environment of a test's own: its variables and home folder.
#[cfg(test)]
mod tests_env {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};

    pub(super) struct FakeEnv {
        vars: HashMap<&'static str, String>,
        home: PathBuf,
    }

    impl FakeEnv {
        pub(super) fn new(home: &Path, vars: &[(&'static str, &str)]) -> FakeEnv {
            FakeEnv {
                vars: vars.iter().map(|(k, v)| (*k, v.to_string())).collect(),
                home: home.to_path_buf(),
            }
        }
    }

    impl super::Environment for FakeEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.vars.get(name).cloned()
        }
        fn home(&self) -> Option<PathBuf> {
            Some(self.home.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tests_env::FakeEnv;
    use super::*;

    fn env(home: &Path, vars: &[(&'static str, &str)]) -> FakeEnv {
        FakeEnv::new(home, vars)
    }

    fn write_private(path: &Path, text: &str, mode: u32) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_password_file_line_matching_host_port_database_and_user_gives_the_password() {
        let home = tempfile::tempdir().unwrap();
        write_private(
            &home.path().join(".pgpass"),
            "# lab\nother:5432:*:*:nope\ndb.lab:5433:pool:alice:no\ndb.lab:5432:pool:alice:s\\:cr\\\\et\n",
            0o600,
        );
        let info =
            ConnInfo::read("postgresql://alice@db.lab/pool", &env(home.path(), &[])).unwrap();
        assert_eq!(info.config.get_password(), Some(&b"s:cr\\et"[..]));
    }

    #[test]
    fn a_password_file_others_may_read_is_ignored_as_libpq_does() {
        let home = tempfile::tempdir().unwrap();
        write_private(&home.path().join(".pgpass"), "*:*:*:*:secret\n", 0o644);
        let info =
            ConnInfo::read("postgresql://alice@db.lab/pool", &env(home.path(), &[])).unwrap();
        assert_eq!(info.config.get_password(), None);
    }

    #[test]
    fn a_password_in_the_url_or_pgpassword_comes_before_the_password_file() {
        let home = tempfile::tempdir().unwrap();
        write_private(&home.path().join(".pgpass"), "*:*:*:*:fromfile\n", 0o600);
        let e = env(home.path(), &[("PGPASSWORD", "fromenv")]);
        let info = ConnInfo::read("postgresql://alice:inurl@db.lab/pool", &e).unwrap();
        assert_eq!(info.config.get_password(), Some(&b"inurl"[..]));
        let info = ConnInfo::read("postgresql://alice@db.lab/pool", &e).unwrap();
        assert_eq!(info.config.get_password(), Some(&b"fromenv"[..]));
    }

    #[test]
    fn a_service_fills_what_the_url_leaves_and_the_url_wins_where_both_say() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join(".pg_service.conf"),
            "[other]\nhost=wrong\n\n[lab]\n# the lab's server\nhost=db.lab\nport=6543\ndbname=pool\nuser=svc\nsslmode=verify-full\nsslrootcert=/etc/lab-ca.pem\n",
        )
        .unwrap();
        let info = ConnInfo::read(
            "postgresql:///?service=lab&user=alice",
            &env(home.path(), &[("PGPORT", "1111")]),
        )
        .unwrap();
        let c = &info.config;
        assert_eq!(c.get_hosts(), [Host::Tcp("db.lab".into())]);
        assert_eq!(c.get_ports(), [6543], "the service comes before PGPORT");
        assert_eq!(c.get_dbname(), Some("pool"));
        assert_eq!(c.get_user(), Some("alice"));
        assert_eq!(c.get_ssl_mode(), SslMode::Require);
        assert_eq!(info.root_cert, Some(PathBuf::from("/etc/lab-ca.pem")));
    }

    #[test]
    fn pgservice_names_the_service_of_a_key_value_string_from_the_system_file() {
        let home = tempfile::tempdir().unwrap();
        let sys = tempfile::tempdir().unwrap();
        std::fs::write(sys.path().join("pg_service.conf"), "[lab]\nhost=db.lab\n").unwrap();
        let e = env(
            home.path(),
            &[
                ("PGSERVICE", "lab"),
                ("PGSYSCONFDIR", sys.path().to_str().unwrap()),
            ],
        );
        let info = ConnInfo::read("dbname=pool user=alice", &e).unwrap();
        assert_eq!(info.config.get_hosts(), [Host::Tcp("db.lab".into())]);
        assert_eq!(info.config.get_dbname(), Some("pool"));
    }

    #[test]
    fn a_service_in_no_file_is_an_error_naming_it_and_where_it_was_looked_for() {
        let home = tempfile::tempdir().unwrap();
        let e = env(home.path(), &[("PGSYSCONFDIR", "/nonexistent")]);
        let err = ConnInfo::read("service=lab dbname=pool", &e)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("\"lab\"") && err.contains(".pg_service.conf"),
            "{err}"
        );
    }

    #[test]
    fn pg_variables_fill_what_the_string_leaves_and_never_add_to_it() {
        let home = tempfile::tempdir().unwrap();
        let e = env(
            home.path(),
            &[
                ("PGHOST", "other"),
                ("PGDATABASE", "pool"),
                ("PGSSLMODE", "disable"),
            ],
        );
        let info = ConnInfo::read("host=db.lab user=alice", &e).unwrap();
        assert_eq!(info.config.get_hosts(), [Host::Tcp("db.lab".into())]);
        assert_eq!(info.config.get_dbname(), Some("pool"));
        assert_eq!(info.config.get_ssl_mode(), SslMode::Disable);
    }

    #[test]
    fn an_sslmode_libpq_does_not_know_is_refused_by_name() {
        let home = tempfile::tempdir().unwrap();
        let err = ConnInfo::read(
            "postgresql://db.lab/pool?sslmode=sometimes",
            &env(home.path(), &[]),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            err.contains("sslmode") && err.contains("sometimes"),
            "{err}"
        );
    }

    #[test]
    fn a_service_file_key_drsd_does_not_take_is_refused_naming_the_file() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join(".pg_service.conf"),
            "[lab]\nsslcert=/x.pem\n",
        )
        .unwrap();
        let err = ConnInfo::read("service=lab", &env(home.path(), &[]))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("sslcert") && err.contains(".pg_service.conf"),
            "{err}"
        );
    }
}

/// Against the tests' real server, where the role `drsd_password_test`
/// must give its password (tests/ci/pg-up.sh).
#[cfg(test)]
mod against_a_server {
    use super::tests_env::FakeEnv;
    use crate::pg::{PgServer, TestDb};

    const ROLE: &str = "drsd_password_test";

    /// The role's password: one for every test, since the role is the
    /// server's, not a test database's.
    const PASSWORD: &str = "drsd-test-password";

    /// The role, made once by whichever test comes first, and allowed into
    /// `db`. Roles are the whole server's and tests run in parallel, each
    /// in a database of its own: the lock is taken in the server's own
    /// database, which they share (an advisory lock holds in one database).
    fn role_with_password(db: &TestDb) {
        db.admin_client()
            .batch_execute(&format!(
                "BEGIN;
                 SELECT pg_advisory_xact_lock(31031);
                 DO $$ BEGIN
                   IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN
                     CREATE ROLE {ROLE} LOGIN;
                   END IF;
                 END $$;
                 ALTER ROLE {ROLE} PASSWORD '{PASSWORD}';
                 GRANT ALL ON DATABASE {} TO {ROLE};
                 COMMIT;",
                db.name
            ))
            .unwrap();
    }

    fn url_as_role(db: &TestDb) -> String {
        let mut url = url::Url::parse(&db.url).unwrap();
        url.set_username(ROLE).unwrap();
        url.set_password(None).unwrap();
        url.to_string()
    }

    #[test]
    fn a_role_that_must_give_its_password_connects_with_the_password_file_alone() {
        let db = TestDb::create();
        role_with_password(&db);
        let home = tempfile::tempdir().unwrap();
        let env = FakeEnv::new(home.path(), &[]);
        let url = url_as_role(&db);
        let err = PgServer::open_in(&url, &env, None)
            .err()
            .expect("no password given");
        let shown = err.to_string();
        assert!(
            shown.contains(ROLE) && shown.contains("127.0.0.1"),
            "{shown}"
        );

        let pgpass = home.path().join(".pgpass");
        std::fs::write(
            &pgpass,
            format!("127.0.0.1:*:{}:{ROLE}:{PASSWORD}\n", db.name),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
        let server =
            PgServer::open_in(&url, &env, None).expect("the password file's password is sent");
        server
            .with("ask", |c| c.client.simple_query("SELECT 1"))
            .unwrap();

        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(
            PgServer::open_in(&url, &env, None).is_err(),
            "a password file others may read is ignored"
        );
    }

    #[test]
    fn a_service_file_names_the_server_database_and_role_of_the_team() {
        let db = TestDb::create();
        role_with_password(&db);
        let home = tempfile::tempdir().unwrap();
        let admin = url::Url::parse(&db.url).unwrap();
        std::fs::write(
            home.path().join(".pg_service.conf"),
            format!(
                "[lab]\nhost={}\nport={}\ndbname={}\nuser={ROLE}\npassword={PASSWORD}\nsslmode=disable\n",
                admin.host_str().unwrap(),
                admin.port().unwrap_or(5432),
                db.name
            ),
        )
        .unwrap();
        let env = FakeEnv::new(home.path(), &[("PGSYSCONFDIR", "/nonexistent")]);
        let server = PgServer::open_in("service=lab", &env, None).expect("the service's server");
        let rows = server
            .with("ask", |c| {
                c.client
                    .query_one("SELECT current_user::text, current_database()::text", &[])
            })
            .unwrap();
        assert_eq!(rows.get::<_, String>(0), ROLE);
        assert_eq!(rows.get::<_, String>(1), db.name);
        assert!(!server.shown().contains(PASSWORD), "{}", server.shown());
    }
}
