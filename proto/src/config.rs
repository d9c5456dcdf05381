//! The daemon's settings file and the `config` request: where the file is
//! ([`config_path`]), and what a running daemon reports about the settings
//! in force ([`ConfigReport`]): each one's value and where it came from,
//! a secret's value never (it travels as [`SECRET_SHOWN`]).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Names another settings file than the default one.
pub const CONFIG_ENV: &str = "DRSD_CONFIG";

/// What a report shows for a secret that is set.
pub const SECRET_SHOWN: &str = "<set>";

/// `DRSD_CONFIG` when set, else `$XDG_CONFIG_HOME/drsd/config.toml` (the
/// platform's configuration folder on macOS). `None`: no home folder.
pub fn config_path() -> Option<PathBuf> {
    match std::env::var_os(CONFIG_ENV) {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => default_config_path(),
    }
}

/// `$XDG_CONFIG_HOME/drsd/config.toml`, whatever `DRSD_CONFIG` says.
pub fn default_config_path() -> Option<PathBuf> {
    let dirs = directories::ProjectDirs::from("", "", "drsd")?;
    Some(dirs.config_dir().join("config.toml"))
}

/// `config`: the settings in force in the daemon. No fields; a struct so
/// that a later one can be added without a new method.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigRequest {}

/// The settings in force and where each came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigReport {
    /// The settings file the daemon looked for.
    pub file: Option<PathBuf>,
    /// Whether it was there and read (a missing default file is no error).
    pub file_read: bool,
    pub settings: Vec<SettingLine>,
}

/// One setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingLine {
    /// Its key in the file: `prefetch_jobs`, `s3.endpoint`.
    pub key: String,
    /// The environment variables that set it, the first one winning.
    pub env: Vec<String>,
    /// The value in force ([`SECRET_SHOWN`] for a secret that is set); for
    /// a default, what the default is.
    pub value: String,
    pub secret: bool,
    pub source: SettingSource,
}

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SettingSource {
    /// A `drsd serve` flag (`--pool`, `--idle-timeout`).
    Flag {
        flag: String,
    },
    Environment {
        var: String,
    },
    File {
        path: PathBuf,
    },
    Default,
}

impl std::fmt::Display for SettingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SettingSource::Flag { flag } => write!(f, "flag {flag}"),
            SettingSource::Environment { var } => write!(f, "env {var}"),
            SettingSource::File { path } => write!(f, "file {}", path.display()),
            SettingSource::Default => f.write_str("default"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Reply, Request, RequestFrame};

    #[test]
    fn the_config_request_and_report_travel_as_json() {
        let frame: RequestFrame = serde_json::from_str(r#"{"id":3,"method":"config"}"#).unwrap();
        assert_eq!(frame.request, Request::Config(ConfigRequest {}));
        let reply = Reply::Config(ConfigReport {
            file: Some("/home/u/.config/drsd/config.toml".into()),
            file_read: true,
            settings: vec![SettingLine {
                key: "s3.endpoint".into(),
                env: vec!["AWS_ENDPOINT_URL".into()],
                value: "http://127.0.0.1:7480".into(),
                secret: false,
                source: SettingSource::File {
                    path: "/home/u/.config/drsd/config.toml".into(),
                },
            }],
        });
        let json = serde_json::to_string(&reply).unwrap();
        assert!(json.contains(r#""kind":"file""#), "{json}");
        assert_eq!(serde_json::from_str::<Reply>(&json).unwrap(), reply);
    }
}
