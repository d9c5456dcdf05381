//! What a daemon needs to know to run: its socket, pool, state folder, timings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::pool::Pool;

/// The daemon's settings. [`Config::resolve`] fills it the way the `drsd`
/// binary does; tests build one with [`Config::in_dir`].
#[derive(Debug, Clone)]
pub struct Config {
    /// The local socket's path (see [`crate::ipc::paths`]).
    pub socket: PathBuf,
    pub pool_dir: PathBuf,
    /// The pool's tier threshold when the pool is created here.
    pub threshold: Option<u64>,
    /// Where the registered repos are kept across restarts.
    pub state_dir: PathBuf,
    /// How long a stopping daemon waits for requests in flight.
    pub drain_timeout: Duration,
    /// Quiet time after a change in a repo before it is rescanned.
    pub debounce: Duration,
    /// How often repos the OS would not watch are rescanned, and every repo
    /// is checked for still being there.
    pub poll_interval: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("no home folder to keep the {what} in; pass {flag}")]
    NoHome {
        what: &'static str,
        flag: &'static str,
    },
}

pub const STATE_DIR_ENV: &str = "DRSD_STATE_DIR";

/// Default timings: drain bound, debounce, poll interval.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEBOUNCE: Duration = Duration::from_millis(200);
pub const POLL_INTERVAL: Duration = Duration::from_secs(30);

impl Config {
    /// Explicit choices first, then the per-user defaults.
    pub fn resolve(
        socket: Option<&Path>,
        pool_dir: Option<PathBuf>,
        state_dir: Option<PathBuf>,
        threshold: Option<u64>,
    ) -> Result<Config, ConfigError> {
        let pool_dir = match pool_dir {
            Some(dir) => dir,
            None => Pool::default_dir().ok_or(ConfigError::NoHome {
                what: "pool",
                flag: "--pool",
            })?,
        };
        let state_dir = match state_dir {
            Some(dir) => dir,
            None => default_state_dir().ok_or(ConfigError::NoHome {
                what: "daemon state",
                flag: "--state-dir",
            })?,
        };
        Ok(Config {
            socket: crate::ipc::paths::socket_path(socket),
            pool_dir,
            threshold,
            state_dir,
            drain_timeout: DRAIN_TIMEOUT,
            debounce: DEBOUNCE,
            poll_interval: POLL_INTERVAL,
        })
    }

    /// Socket, pool and state all under `dir`, default timings: for tests and
    /// throwaway daemons.
    pub fn in_dir(dir: &Path) -> Config {
        Config {
            socket: dir.join("run").join(crate::ipc::paths::SOCKET_NAME),
            pool_dir: dir.join("pool"),
            threshold: None,
            state_dir: dir.join("state"),
            drain_timeout: DRAIN_TIMEOUT,
            debounce: DEBOUNCE,
            poll_interval: POLL_INTERVAL,
        }
    }
}

/// `$XDG_STATE_HOME/drsd` on Linux (`~/.local/state/drsd`); the local data
/// folder where the platform has no state folder (macOS).
pub fn default_state_dir() -> Option<PathBuf> {
    let dirs = directories::ProjectDirs::from("", "", "drsd")?;
    Some(
        dirs.state_dir()
            .unwrap_or(dirs.data_local_dir())
            .to_path_buf(),
    )
}
