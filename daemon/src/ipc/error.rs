use std::path::PathBuf;

use super::protocol::WireError;

/// What can go wrong talking to the daemon, naming the socket or file involved.
#[derive(Debug, thiserror::Error)]
pub enum IpcError {
    #[error("the socket folder {dir} {why}")]
    SocketDir { dir: PathBuf, why: String },
    #[error("no drsd daemon answers on {socket}: {source}")]
    NotRunning {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("starting drsd ({drsd}) failed: {why}; its log is {log}")]
    StartFailed {
        drsd: PathBuf,
        log: PathBuf,
        why: String,
    },
    #[error("the daemon on {socket} closed the connection before answering")]
    Closed { socket: PathBuf },
    #[error("the daemon on {socket} sent something this client cannot read: {why}")]
    Protocol { socket: PathBuf, why: String },
    #[error("drsd: {0}")]
    Daemon(#[from] WireError),
}

impl IpcError {
    pub(crate) fn io(op: &'static str, path: &std::path::Path, source: std::io::Error) -> IpcError {
        IpcError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}
