//! Errors, as they travel and as a client meets them: [`WireError`] (a
//! stable [`ErrorCode`] for scripts and a message for people) is what the
//! daemon sends; [`IpcError`] is everything a client can run into talking to
//! it, naming the socket or file involved.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What can go wrong talking to the daemon, naming the socket or file involved.
#[derive(Debug, thiserror::Error)]
pub enum IpcError {
    #[error("the socket folder {dir} {why}")]
    SocketDir { dir: PathBuf, why: String },
    #[error("the socket {socket} {why}")]
    SocketFile { socket: PathBuf, why: String },
    /// What listens on the socket runs as another user: nothing was sent to it.
    #[error(
        "the process listening on {socket} runs as uid {uid}, not as us (uid {me}): \
         nothing was sent to it; another user may have taken the socket's place"
    )]
    PeerNotUs { socket: PathBuf, uid: u32, me: u32 },
    #[error(
        "the process listening on {socket} cannot be identified ({why}): nothing was sent to it"
    )]
    PeerUnknown { socket: PathBuf, why: String },
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

/// `error` and its causes on one line (`a: b: c`), each said once. Most
/// errors here name their cause in their own message and also expose it as
/// `source()` for callers that inspect it, so printing every link of the
/// chain (anyhow's `{:#}`, or its `Caused by:` list) would say each cause
/// twice; a cause already in the text is not repeated.
pub fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let said = next.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = next.source();
    }
    text
}

impl IpcError {
    /// Whether the socket or what listens on it is not to be trusted (not
    /// merely absent): a client must stop there rather than carry on without
    /// the daemon.
    pub fn is_untrusted(&self) -> bool {
        matches!(
            self,
            IpcError::SocketDir { .. }
                | IpcError::SocketFile { .. }
                | IpcError::PeerNotUs { .. }
                | IpcError::PeerUnknown { .. }
        )
    }

    pub(crate) fn io(op: &'static str, path: &std::path::Path, source: std::io::Error) -> IpcError {
        IpcError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// An error as it travels: a stable code for scripts, a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({code})")]
pub struct WireError {
    pub code: ErrorCode,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not JSON or not a known request.
    BadRequest,
    /// The line is longer than [`MAX_REQUEST_LINE`](crate::MAX_REQUEST_LINE).
    TooLong,
    /// A request came before `hello`.
    HandshakeRequired,
    VersionMismatch,
    /// The peer runs as another user.
    PermissionDenied,
    /// An argument names something that is not there or not usable.
    InvalidArgument,
    NotFound,
    /// The daemon failed at something on its side.
    Internal,
    /// A file system the daemon writes to (the pool, the state folder, a
    /// repo) is full: free space there, then try again. The message names
    /// the file.
    NoSpace,
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl WireError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> WireError {
        WireError {
            code,
            message: message.into(),
        }
    }
}

impl ErrorCode {
    /// The code as it travels (`no_space`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::TooLong => "too_long",
            ErrorCode::HandshakeRequired => "handshake_required",
            ErrorCode::VersionMismatch => "version_mismatch",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Internal => "internal",
            ErrorCode::NoSpace => "no_space",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_error_is_said_once_with_its_code() {
        let wire = WireError::new(ErrorCode::InvalidArgument, "/x is not a git work tree");
        let error = anyhow::Error::from(IpcError::Daemon(wire));
        assert_eq!(
            one_line(error.as_ref()),
            "drsd: /x is not a git work tree (invalid_argument)"
        );
    }

    #[test]
    fn causes_not_in_the_message_are_still_named_each_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let ipc = IpcError::NotRunning {
            socket: "/run/d.sock".into(),
            source: io,
        };
        let error = anyhow::Error::from(ipc).context("asking for the status");
        assert_eq!(
            one_line(error.as_ref()),
            "asking for the status: no drsd daemon answers on /run/d.sock: gone"
        );
    }
}
