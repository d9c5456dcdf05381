//! What a daemon needs to know to run: its socket, pool, state folder,
//! timings, and the [`Settings`] it was started with (which the remote
//! clients read too).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::pool::Pool;
use crate::remote::UploadOptions;
use crate::settings::{Key, Settings};

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
    /// Every setting and where it came from, for the remote clients and
    /// `drsctl config`.
    pub settings: Arc<Settings>,
}

/// The background prefetch of foreign objects, from the settings:
/// `prefetch_jobs` (objects at once, default 2), `prefetch_bandwidth`
/// (bytes/s over all of them; default unlimited), `prefetch_max_size`
/// (larger objects are held, not fetched) and `retry_secs` (the first
/// backoff after a failure, doubling to at most an hour; default 30).
/// `multipart_part_size` (e.g. `8M`): a part size tried first for `-N`
/// ETags, where it fits the parts count (`remote::parts` chooses otherwise).
/// `partial_max`: the most bytes the partial downloads of failed jobs keep
/// in all (default 1G; beyond it the oldest go).
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
    pub fn from_settings(settings: &Settings) -> PrefetchConfig {
        let d = PrefetchConfig::default();
        PrefetchConfig {
            jobs: settings
                .number(Key::PrefetchJobs)
                .map_or(d.jobs, |n| n.clamp(1, usize::MAX as u64) as usize),
            small_jobs: settings
                .number(Key::PrefetchSmallJobs)
                .map_or(d.small_jobs, |n| n.min(usize::MAX as u64) as usize),
            bandwidth: settings.number(Key::PrefetchBandwidth),
            max_size: settings.number(Key::PrefetchMaxSize),
            retry: settings.secs(Key::RetrySecs).unwrap_or(d.retry),
            part_size: settings.number(Key::MultipartPartSize),
            partial_max: settings.number(Key::PartialMax).unwrap_or(d.partial_max),
        }
    }
}

/// Uploads and server-side copies: `upload_part_size` (the part size of
/// multipart uploads and of copies in parts; default 64M) and
/// `copy_whole_max` (larger objects are copied in parts; default 5G, S3's
/// limit for one CopyObject).
fn upload_from_settings(settings: &Settings) -> UploadOptions {
    let d = UploadOptions::default();
    UploadOptions {
        part_size: settings
            .number(Key::UploadPartSize)
            .map_or(d.part_size, |n| n.max(1)),
        copy_whole_max: settings
            .number(Key::CopyWholeMax)
            .unwrap_or(d.copy_whole_max),
        ..d
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("no home folder to keep the {what} in; pass {flag}")]
    NoHome {
        what: &'static str,
        flag: &'static str,
    },
}

/// Default timings: drain bound, debounce, poll interval.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEBOUNCE: Duration = Duration::from_millis(200);
pub const POLL_INTERVAL: Duration = Duration::from_secs(30);

impl Config {
    /// The settings' choices first (`pool`, `state_dir`, `idle_timeout`,
    /// prefetch and upload sizes), then the per-user defaults.
    pub fn resolve(
        socket: Option<&Path>,
        threshold: Option<u64>,
        settings: Arc<Settings>,
    ) -> Result<Config, ConfigError> {
        let pool_dir = match settings.path(Key::Pool) {
            Some(dir) => dir.to_path_buf(),
            None => Pool::default_dir().ok_or(ConfigError::NoHome {
                what: "pool",
                flag: "--pool",
            })?,
        };
        let state_dir = match settings.path(Key::StateDir) {
            Some(dir) => dir.to_path_buf(),
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
            prefetch: PrefetchConfig::from_settings(&settings),
            upload: upload_from_settings(&settings),
            idle_timeout: settings.secs(Key::IdleTimeout).filter(|t| !t.is_zero()),
            settings,
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
            settings: Arc::default(),
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
