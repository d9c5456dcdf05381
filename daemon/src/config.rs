//! What a daemon needs to know to run: its socket, pool, state folder, timings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::pool::Pool;
use crate::remote::UploadOptions;

/// The daemon's settings. [`Config::resolve`] fills it the way the `drsd`
/// binary does; tests build one with [`Config::in_dir`].
#[derive(Debug, Clone)]
pub struct Config {
    /// The local socket's path (see [`drsd_proto::paths`]).
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
    pub prefetch: PrefetchConfig,
    pub upload: UploadOptions,
    /// Stop after this long with no client and no prefetch due: for daemons
    /// started on demand. `None` runs until stopped.
    pub idle_timeout: Option<Duration>,
}

/// The background prefetch of foreign objects, from the environment:
/// `DRSD_PREFETCH_JOBS` (objects at once, default 2),
/// `DRSD_PREFETCH_BANDWIDTH` (bytes/s over all of them, with an optional
/// K/M/G suffix; default unlimited), `DRSD_PREFETCH_MAX_SIZE` (larger objects
/// are held, not fetched) and `DRSD_RETRY_SECS` (the first backoff after a
/// failure, doubling to at most an hour; default 30). `DRSD_MULTIPART_PART_SIZE`
/// (e.g. `8M`, the AWS tools' default): the part size the stores' multipart
/// uploads used, so their `-N` ETags can be checked. `DRSD_PARTIAL_MAX`:
/// the most bytes the partial downloads of failed jobs keep in all (default
/// 1G; beyond it the oldest go).
#[derive(Debug, Clone)]
pub struct PrefetchConfig {
    pub jobs: usize,
    /// Workers for objects of the pool's kv tier only (`DRSD_PREFETCH_SMALL_JOBS`,
    /// default 32): small objects are fetched in one GET each, so their
    /// time is round trips, and many in flight hide them (as `curl
    /// --parallel` does).
    pub small_jobs: usize,
    pub bandwidth: Option<u64>,
    pub max_size: Option<u64>,
    pub retry: Duration,
    pub part_size: Option<u64>,
    pub partial_max: u64,
}

impl Default for PrefetchConfig {
    fn default() -> PrefetchConfig {
        PrefetchConfig {
            jobs: 2,
            small_jobs: 32,
            bandwidth: None,
            max_size: None,
            retry: Duration::from_secs(30),
            part_size: None,
            partial_max: crate::remote::partials::DEFAULT_PARTIAL_MAX,
        }
    }
}

impl PrefetchConfig {
    pub fn from_env() -> Result<PrefetchConfig, ConfigError> {
        let d = PrefetchConfig::default();
        Ok(PrefetchConfig {
            jobs: env_size("DRSD_PREFETCH_JOBS")?.map_or(d.jobs, |n| n.max(1) as usize),
            small_jobs: env_size("DRSD_PREFETCH_SMALL_JOBS")?.map_or(d.small_jobs, |n| n as usize),
            bandwidth: env_size("DRSD_PREFETCH_BANDWIDTH")?,
            max_size: env_size("DRSD_PREFETCH_MAX_SIZE")?,
            retry: env_size("DRSD_RETRY_SECS")?.map_or(d.retry, Duration::from_secs),
            part_size: env_size("DRSD_MULTIPART_PART_SIZE")?,
            partial_max: env_size(crate::remote::partials::PARTIAL_MAX_ENV)?
                .unwrap_or(d.partial_max),
        })
    }
}

/// Uploads and server-side copies, from the environment:
/// `DRSD_UPLOAD_PART_SIZE` (the part size of multipart uploads and of copies
/// in parts; default 64M) and `DRSD_COPY_WHOLE_MAX` (larger objects are
/// copied in parts; default 5G, S3's limit for one CopyObject).
fn upload_from_env() -> Result<UploadOptions, ConfigError> {
    let d = UploadOptions::default();
    Ok(UploadOptions {
        part_size: env_size("DRSD_UPLOAD_PART_SIZE")?.map_or(d.part_size, |n| n.max(1)),
        copy_whole_max: env_size("DRSD_COPY_WHOLE_MAX")?.unwrap_or(d.copy_whole_max),
        ..d
    })
}

/// `123`, `64K`, `50M`, `2G` (powers of 1024) from the variable `name`.
fn env_size(name: &'static str) -> Result<Option<u64>, ConfigError> {
    let Ok(text) = std::env::var(name) else {
        return Ok(None);
    };
    parse_size(&text)
        .map(Some)
        .ok_or(ConfigError::BadSize { name, value: text })
}

fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, shift) = match text.chars().last()?.to_ascii_uppercase() {
        'K' => (&text[..text.len() - 1], 10),
        'M' => (&text[..text.len() - 1], 20),
        'G' => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("no home folder to keep the {what} in; pass {flag}")]
    NoHome {
        what: &'static str,
        flag: &'static str,
    },
    #[error("{name}={value:?} is not a size (a number, optionally with K, M or G)")]
    BadSize { name: &'static str, value: String },
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
            socket: drsd_proto::paths::socket_path(socket),
            pool_dir,
            threshold,
            state_dir,
            drain_timeout: DRAIN_TIMEOUT,
            debounce: DEBOUNCE,
            poll_interval: POLL_INTERVAL,
            prefetch: PrefetchConfig::from_env()?,
            upload: upload_from_env()?,
            idle_timeout: None,
        })
    }

    /// Socket, pool and state all under `dir`, default timings: for tests and
    /// throwaway daemons.
    pub fn in_dir(dir: &Path) -> Config {
        Config {
            socket: dir.join("run").join(drsd_proto::paths::SOCKET_NAME),
            pool_dir: dir.join("pool"),
            threshold: None,
            state_dir: dir.join("state"),
            drain_timeout: DRAIN_TIMEOUT,
            debounce: DEBOUNCE,
            poll_interval: POLL_INTERVAL,
            prefetch: PrefetchConfig::default(),
            upload: UploadOptions::default(),
            idle_timeout: None,
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

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("123"), Some(123));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size(" 50M "), Some(50 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("fast"), None);
        assert_eq!(parse_size(""), None);
    }
}
