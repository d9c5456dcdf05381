//! S3 credentials, found the way the AWS tools find them (the settings:
//! the environment or drsd's settings file, else a profile in the shared
//! credentials file, else anonymous), and
//! where they came from: errors about a refused request name that source so
//! the user knows which setting to fix, never the secret itself.

use std::fmt;
use std::path::{Path, PathBuf};

use super::RemoteError;
use crate::settings::{Key, Settings, Source};

/// Where credentials came from, for error messages (never the secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    Environment,
    /// drsd's settings file (`s3.access_key_id`).
    SettingsFile {
        path: PathBuf,
    },
    Profile {
        name: String,
        path: PathBuf,
    },
    Anonymous,
}

impl fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialSource::Environment => f.write_str("the environment (AWS_ACCESS_KEY_ID)"),
            CredentialSource::SettingsFile { path } => {
                write!(f, "s3.access_key_id in {}", path.display())
            }
            CredentialSource::Profile { name, path } => {
                write!(f, "profile [{name}] in {}", path.display())
            }
            CredentialSource::Anonymous => f.write_str("nowhere (anonymous requests)"),
        }
    }
}

/// Credentials found the way the AWS tools find them: the settings
/// `s3.access_key_id` / `s3.secret_access_key` / `s3.session_token`
/// (`AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`),
/// else the profile `s3.profile` (`AWS_PROFILE`, default `default`) in
/// `s3.credentials_file` (`AWS_SHARED_CREDENTIALS_FILE`) or
/// `~/.aws/credentials`, else anonymous.
#[derive(Clone)]
pub struct S3Credentials {
    pub(super) keys: Option<rusty_s3::Credentials>,
    pub source: CredentialSource,
}

impl fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "S3Credentials(from {})", self.source)
    }
}

impl S3Credentials {
    /// [`S3Credentials::from_settings`] over the environment alone.
    pub fn from_env() -> Result<S3Credentials, RemoteError> {
        S3Credentials::from_settings(&Settings::from_env()?)
    }

    /// The chain over `settings`, the profile file under the user's home.
    pub fn from_settings(settings: &Settings) -> Result<S3Credentials, RemoteError> {
        let home = directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf());
        Self::resolve(settings, home.as_deref())
    }

    /// The chain over any settings and home, so it can be tested hermetically.
    pub fn resolve(settings: &Settings, home: Option<&Path>) -> Result<S3Credentials, RemoteError> {
        let text = |key| settings.text(key).map(str::to_string);
        if let (Some(key), Some(secret)) = (text(Key::S3AccessKeyId), text(Key::S3SecretAccessKey))
        {
            let source = match settings.source(Key::S3AccessKeyId) {
                Some(Source::File(path)) => CredentialSource::SettingsFile { path: path.clone() },
                _ => CredentialSource::Environment,
            };
            return Ok(S3Credentials {
                keys: Some(with_token(key, secret, text(Key::S3SessionToken))),
                source,
            });
        }
        let path = match settings.path(Key::S3CredentialsFile) {
            Some(p) => p.to_path_buf(),
            None => match home {
                Some(h) => h.join(".aws/credentials"),
                None => return Ok(Self::anonymous()),
            },
        };
        let name = text(Key::S3Profile).unwrap_or_else(|| "default".into());
        // Keys from a file another user could write would sign for their
        // account (`trusted_file`).
        let text = match crate::trusted_file::read(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(t) => t,
                Err(_) => {
                    return Err(RemoteError::Credentials {
                        path,
                        why: "it is not UTF-8 text".into(),
                    })
                }
            },
            Err(e) if e.is_not_found() => return Ok(Self::anonymous()),
            Err(e) => {
                return Err(RemoteError::Credentials {
                    path,
                    why: e.to_string(),
                })
            }
        };
        let keys = profile_keys(&text, &name).map_err(|why| RemoteError::Credentials {
            path: path.clone(),
            why: why.to_string(),
        })?;
        Ok(S3Credentials {
            keys: Some(keys),
            source: CredentialSource::Profile { name, path },
        })
    }

    pub fn anonymous() -> S3Credentials {
        S3Credentials {
            keys: None,
            source: CredentialSource::Anonymous,
        }
    }

    pub fn new(key: &str, secret: &str) -> S3Credentials {
        S3Credentials {
            keys: Some(rusty_s3::Credentials::new(key, secret)),
            source: CredentialSource::Environment,
        }
    }
}

fn with_token(key: String, secret: String, token: Option<String>) -> rusty_s3::Credentials {
    match token {
        Some(t) => rusty_s3::Credentials::new_with_token(key, secret, t),
        None => rusty_s3::Credentials::new(key, secret),
    }
}

/// A profile of the credentials file without both keys: the `why` of the
/// `RemoteError::Credentials` that names the file.
#[derive(Debug, thiserror::Error)]
#[error("profile [{0}] has no aws_access_key_id and aws_secret_access_key")]
struct NoKeys(String);

/// The keys of `[name]` in an AWS credentials file (INI).
fn profile_keys(text: &str, name: &str) -> Result<rusty_s3::Credentials, NoKeys> {
    let (mut key, mut secret, mut token) = (None, None, None);
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = section.trim() == name;
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if !inside {
            continue;
        }
        let v = Some(v.trim().to_string());
        match k.trim() {
            "aws_access_key_id" => key = v,
            "aws_secret_access_key" => secret = v,
            "aws_session_token" => token = v,
            _ => {}
        }
    }
    match (key, secret) {
        (Some(k), Some(s)) => Ok(with_token(k, s, token)),
        _ => Err(NoKeys(name.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_first_then_profile_then_anonymous() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".aws/credentials");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            "[default]\naws_access_key_id = A\naws_secret_access_key = B\n\
             [ci]\naws_access_key_id=C\naws_secret_access_key=ci-secret-value\naws_session_token=T\n[empty]\n",
        )
        .unwrap();
        let env = |pairs: &[(&str, &str)]| Settings::from_pairs(pairs).unwrap();
        let c = S3Credentials::resolve(
            &env(&[("AWS_ACCESS_KEY_ID", "E"), ("AWS_SECRET_ACCESS_KEY", "F")]),
            Some(dir.path()),
        )
        .unwrap();
        assert_eq!(
            (c.source, c.keys.unwrap().key().to_string()),
            (CredentialSource::Environment, "E".into())
        );
        let c = S3Credentials::resolve(&env(&[]), Some(dir.path())).unwrap();
        assert_eq!(c.keys.unwrap().secret(), "B");
        let c = S3Credentials::resolve(&env(&[("AWS_PROFILE", "ci")]), Some(dir.path())).unwrap();
        let keys = c.keys.clone().unwrap();
        assert_eq!((keys.key(), keys.token()), ("C", Some("T")));
        assert!(c.source.to_string().contains("[ci]"));
        assert!(
            !format!("{c:?}").contains("ci-secret-value"),
            "Debug must not show the secret"
        );
        let err = S3Credentials::resolve(&env(&[("AWS_PROFILE", "empty")]), Some(dir.path()))
            .unwrap_err();
        assert!(err.to_string().contains("[empty]"), "{err}");
        let none = tempfile::tempdir().unwrap();
        let c = S3Credentials::resolve(&env(&[]), Some(none.path())).unwrap();
        assert_eq!(c.source, CredentialSource::Anonymous);
    }

    /// Keys from a file another user could write would sign for their
    /// account: refused, naming the file, its mode and the chmod (and, as
    /// root, a file given to another user; skipped when not root).
    #[test]
    fn a_credentials_file_another_user_could_change_is_refused_naming_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".aws/credentials");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            "[default]\naws_access_key_id = A\naws_secret_access_key = s3cr3t\n",
        )
        .unwrap();
        let settings = Settings::from_pairs(&[]).unwrap();
        let resolve = |mode: u32| {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            S3Credentials::resolve(&settings, Some(dir.path()))
        };
        let err = resolve(0o666).unwrap_err().to_string();
        assert!(
            err.contains(&file.display().to_string())
                && err.contains("mode 666")
                && err.contains(&format!("chmod go-w {}", file.display())),
            "{err}"
        );
        assert!(!err.contains("s3cr3t"), "{err}");
        assert_eq!(resolve(0o600).unwrap().keys.unwrap().secret(), "s3cr3t");
        if drsd_proto::paths::current_uid() == 0 {
            std::os::unix::fs::lchown(&file, Some(65534), None).unwrap();
            let err = resolve(0o600).unwrap_err().to_string();
            assert!(err.contains("owned by uid 65534"), "{err}");
        } else {
            eprintln!("not root: the another-user half is skipped");
        }
    }
}
