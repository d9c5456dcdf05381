//! Logins from the user's netrc file, for HTTP Basic to DRS servers and
//! Indexd, the way curl (and so git) finds them.
//!
//! - The file: `$NETRC` when set, else `$HOME/.netrc`. Read at each use,
//!   so an edit needs no restart; a missing file is no login.
//! - The entry: `machine HOST` matched without case against the request's
//!   host alone (no port, as curl does), else the `default` entry, but
//!   `default` only where the caller allows it: a DRS URI names any host it
//!   likes, so a catch-all login goes only to servers the user named.
//! - Tokens are parsed by the `rust-netrc` crate (Python's netrc rules):
//!   blanks separate tokens, `"quoted tokens"` may hold blanks, `\` escapes
//!   the next character, `#` starts a comment, `macdef` blocks are
//!   skipped. One difference from curl: when a machine appears twice, the
//!   last entry wins (curl takes the first).
//!
//! The parser's own error text can quote a token of the file (a password
//! with a blank in it splits into a stray token), so a file that does not
//! parse is reported by its path alone.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use super::auth::CredentialKind;
use super::DrsError;
use crate::settings::{Key, Settings};

/// A login found for a host: the user, the password, and where it came
/// from. Debug shows the user and the source, never the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    pub user: String,
    pub password: String,
    pub kind: CredentialKind,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Login({:?} from {})", self.user, self.kind)
    }
}

/// Which file holds the user's logins, and how errors name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetrcFile {
    path: Option<PathBuf>,
    /// `~/.netrc` for the default file, the path otherwise.
    shown: String,
}

impl NetrcFile {
    /// The `netrc` setting (`$NETRC`), else `~/.netrc`.
    pub fn from_settings(settings: &Settings) -> NetrcFile {
        let home = directories::BaseDirs::new().map(|d| d.home_dir().as_os_str().to_owned());
        NetrcFile::locate(|name| match name {
            "NETRC" => settings.path(Key::Netrc).map(|p| p.as_os_str().to_owned()),
            "HOME" => home.clone(),
            _ => None,
        })
    }

    /// The same choice over any variable lookup, so it can be tested
    /// without touching the process's environment.
    pub fn locate(var: impl Fn(&str) -> Option<OsString>) -> NetrcFile {
        let set = |name: &str| var(name).filter(|v| !v.is_empty());
        if let Some(path) = set("NETRC") {
            return NetrcFile::at(PathBuf::from(path));
        }
        NetrcFile {
            path: set("HOME").map(|home| PathBuf::from(home).join(".netrc")),
            shown: "~/.netrc".into(),
        }
    }

    pub fn at(path: PathBuf) -> NetrcFile {
        NetrcFile {
            shown: path.display().to_string(),
            path: Some(path),
        }
    }

    /// The login for `url`'s host: its `machine` entry, else the `default`
    /// one when `default_too`. `None`: no file, no entry, or an entry
    /// without a login name.
    pub fn login(&self, url: &url::Url, default_too: bool) -> Result<Option<Login>, DrsError> {
        let (Some(path), Some(host)) = (&self.path, url.host_str()) else {
            return Ok(None);
        };
        // Checked at each use, as it is read (`trusted_file`): logins from a
        // file another user could write would go where they chose.
        let bytes = match crate::trusted_file::read(path) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(self.error(e.to_string())),
        };
        let parsed: netrc::Netrc = String::from_utf8_lossy(&bytes)
            .parse()
            .map_err(|_| self.error("it does not parse as a netrc file".into()))?;
        let machine = parsed
            .hosts
            .iter()
            .find(|(name, _)| name.as_str() != "default" && name.eq_ignore_ascii_case(host))
            .map(|(_, entry)| entry);
        let entry = machine.or(default_too.then(|| parsed.hosts.get("default")).flatten());
        Ok(entry.filter(|e| !e.login.is_empty()).map(|e| Login {
            user: e.login.clone(),
            password: e.password.clone(),
            kind: CredentialKind::Netrc {
                file: self.shown.clone(),
                host: host.to_string(),
            },
        }))
    }

    /// The file as messages name it.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    fn error(&self, why: String) -> DrsError {
        DrsError::Credentials {
            what: "the netrc file",
            path: self.path.clone().unwrap_or_default(),
            why,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> (tempfile::TempDir, NetrcFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("netrc");
        std::fs::write(&path, text).unwrap();
        (dir, NetrcFile::at(path))
    }

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).unwrap()
    }

    fn user_and_password(
        netrc: &NetrcFile,
        at: &str,
        default_too: bool,
    ) -> Option<(String, String)> {
        netrc
            .login(&url(at), default_too)
            .unwrap()
            .map(|l| (l.user, l.password))
    }

    fn pair(u: &str, p: &str) -> Option<(String, String)> {
        Some((u.into(), p.into()))
    }

    #[test]
    fn the_machine_entry_for_the_host_is_used_whatever_the_case_and_port() {
        let (_dir, netrc) = file(
            "machine indexd.example.org login alice password s3cr3t\n\
             machine other.org\n  login bob\n  password pw2\n",
        );
        assert_eq!(
            user_and_password(&netrc, "https://Indexd.Example.org:8443/index/", false),
            pair("alice", "s3cr3t")
        );
        assert_eq!(
            user_and_password(&netrc, "http://other.org/", false),
            pair("bob", "pw2")
        );
        assert_eq!(user_and_password(&netrc, "https://nobody.org/", true), None);
    }

    #[test]
    fn the_default_entry_applies_only_where_allowed() {
        let (_dir, netrc) = file("machine a.org login a password 1\ndefault login d password 2\n");
        assert_eq!(
            user_and_password(&netrc, "https://b.org/", true),
            pair("d", "2")
        );
        assert_eq!(user_and_password(&netrc, "https://b.org/", false), None);
        assert_eq!(
            user_and_password(&netrc, "https://a.org/", false),
            pair("a", "1")
        );
    }

    #[test]
    fn quoted_tokens_escapes_comments_and_macros_are_read_as_curl_reads_them() {
        let (_dir, netrc) = file(
            "# a comment\n\
             macdef init\n  cd /pub\n  ls\n\n\
             machine q.org login \"al ice\" password \"p\\\"w d\" # trailing\n",
        );
        assert_eq!(
            user_and_password(&netrc, "https://q.org/", false),
            pair("al ice", "p\"w d")
        );
    }

    #[test]
    fn an_entry_without_a_login_is_no_login() {
        let (_dir, netrc) = file("machine h.org password only\n");
        assert_eq!(user_and_password(&netrc, "https://h.org/", true), None);
    }

    #[test]
    fn a_missing_file_is_no_login_and_a_broken_one_is_named_without_its_text() {
        let dir = tempfile::tempdir().unwrap();
        let missing = NetrcFile::at(dir.path().join("none"));
        assert_eq!(missing.login(&url("https://h/"), true).unwrap(), None);
        let (_dir, broken) = file("machine h.org login al password two words\n");
        let err = broken
            .login(&url("https://h.org/"), true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("does not parse") && err.contains("netrc"),
            "{err}"
        );
        assert!(!err.contains("words") && !err.contains("two"), "{err}");
    }

    #[test]
    fn netrc_names_the_file_else_home_holds_it() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let chosen = NetrcFile::locate(env(&[("NETRC", "/etc/n"), ("HOME", "/home/u")]));
        assert_eq!(chosen, NetrcFile::at("/etc/n".into()));
        let home = NetrcFile::locate(env(&[("NETRC", ""), ("HOME", "/home/u")]));
        assert_eq!(home.path, Some(PathBuf::from("/home/u/.netrc")));
        assert_eq!(home.shown, "~/.netrc");
        assert_eq!(NetrcFile::locate(env(&[])).path, None);
    }

    #[test]
    fn a_login_names_its_source_and_hides_its_password() {
        let (_dir, netrc) = file("machine h.org login alice password s3cr3t\n");
        let login = netrc.login(&url("https://h.org/"), false).unwrap().unwrap();
        let shown = format!("{login:?}");
        assert!(
            shown.contains("alice") && !shown.contains("s3cr3t"),
            "{shown}"
        );
        assert!(
            login.kind.to_string().ends_with("login for h.org"),
            "{}",
            login.kind
        );
    }
}
