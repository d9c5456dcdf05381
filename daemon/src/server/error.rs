//! Why a daemon could not start or stopped: the one error `run` and
//! `Daemon::bind` return, each variant naming the path involved. Request
//! failures are not here: they travel to clients as `WireError`s.

use std::path::PathBuf;

use crate::ops::repos::StateError;
use crate::pool::PoolError;
use crate::watch::WatchError;
use crate::IoError;
use drsd_proto::IpcError;

/// Why a daemon could not start or stopped, naming the path involved.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("drsd is already running on {socket} ({how}); stop it with `drsctl shutdown`")]
    AlreadyRunning { socket: PathBuf, how: &'static str },
    #[error("{path} exists and is not a socket; move it away or pick another --socket")]
    NotSocket { path: PathBuf },
    #[error(transparent)]
    SocketDir(#[from] IpcError),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("opening the pool at {path}: {source}")]
    Pool {
        path: PathBuf,
        #[source]
        source: Box<PoolError>,
    },
    /// The repo book's file (`repos.json`) cannot be read.
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Watch(#[from] WatchError),
    #[error("opening the registry of foreign objects: {0}")]
    Registry(Box<crate::registry::RegistryError>),
    /// The team's gc tables (published roots, grace records) could not be
    /// opened.
    #[error("opening the team's gc records: {0}")]
    TeamGc(Box<crate::ops::gc::GcError>),
    /// `team_db` names a database that does not answer, and `team_required`
    /// (the default) says not to run without it.
    #[error(
        "the team database {server} does not answer: {source}; start it (or fix team_db), \
         or set team_required = false to run without the team"
    )]
    TeamDown {
        server: String,
        #[source]
        source: Box<PoolError>,
    },
    /// A file that decides which server is the team's database (its CA
    /// file) was refused: never a reason to run without the team quietly.
    #[error("connecting to the team database {server}: {source}")]
    TeamTrust {
        server: String,
        #[source]
        source: Box<PoolError>,
    },
}

impl DaemonError {
    pub(crate) fn io(
        op: &'static str,
        path: &std::path::Path,
        source: std::io::Error,
    ) -> DaemonError {
        DaemonError::Io(IoError::new(op, path, source))
    }
}
