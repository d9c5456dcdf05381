//! [`PoolError`]: every way a pool operation fails, naming the path or key
//! and what was being done, so a message read in a log says where to look.

use std::path::PathBuf;

use super::Oid;

/// What went wrong in the pool, with the path or key and what was being done.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error(transparent)]
    Io(#[from] crate::IoError),
    #[error("sqlite {op} in {path}: {source}")]
    Sqlite {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// The server as `shown` names it: never the password.
    #[error("postgres {op} on {server}: {}", crate::pg::pg_detail(source))]
    Postgres {
        op: &'static str,
        server: String,
        #[source]
        source: postgres::Error,
    },
    #[error(transparent)]
    ConnInfo(#[from] crate::pg::ConnInfoError),
    #[error("the stage of {what} was removed before its commit (its writer was silent past the lease); nothing stored")]
    StageLost { what: String },
    #[error("reading the source stream after {at} bytes: {source}")]
    Stream {
        at: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("content does not match its key: expected sha256 {expected}, got {got} ({len} bytes); nothing stored")]
    HashMismatch { expected: Oid, got: Oid, len: u64 },
    /// Found on the way out: the entry was moved aside and nothing of it
    /// was handed on.
    #[error("pool entry {oid} is corrupt: its content hashes to {got}; {quarantined}, nothing of it was handed on")]
    Corrupt {
        oid: Oid,
        got: Oid,
        /// Where the bytes went, as a phrase.
        quarantined: String,
    },
    /// A file of ours that kept changing while it was hashed: nothing of
    /// it was handed on, and it stays where it is.
    #[error("pool entry {oid} ({}) kept changing while it was hashed; nothing of it was handed on", path.display())]
    Unsteady { oid: Oid, path: PathBuf },
    /// A folder of a lab's shared folder that the team's group cannot use.
    #[error("shared folder {}: {why}", path.display())]
    NotTheGroups { path: PathBuf, why: String },
    #[error("range {offset}+{len} is outside blob {key} of {size} bytes")]
    Range {
        key: Oid,
        offset: u64,
        len: u64,
        size: u64,
    },
    #[error("key {key:?} is not usable by the {engine} engine: {why}")]
    BadKey {
        engine: &'static str,
        key: String,
        why: &'static str,
    },
    /// A file that decides what is trusted (a CA file) was refused.
    #[error("{what} {path}: {why}")]
    TrustedFile {
        what: &'static str,
        path: PathBuf,
        why: String,
    },
    /// This node's own folder in the shared folder is not its own.
    #[error(transparent)]
    NodeDir(#[from] super::node_dir::NodeDirError),
    #[error("pool settings in {path}: {why}")]
    Config { path: PathBuf, why: String },
    #[error("not a sha256 object id: {0:?} (want 64 hex digits)")]
    BadOid(String),
}

impl From<drsd_proto::BadOid> for PoolError {
    fn from(bad: drsd_proto::BadOid) -> PoolError {
        PoolError::BadOid(bad.0)
    }
}

pub type Result<T, E = PoolError> = std::result::Result<T, E>;

/// Attaches the operation and path to an I/O error.
pub(crate) trait IoContext<T> {
    fn at(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| PoolError::Io(crate::IoError::new(op, path.into(), source)))
    }
}

impl PoolError {
    /// Whether this is a team database out of reach (down, restarting, cut
    /// off) past what its calls wait: a later call may succeed.
    pub fn unreachable(&self) -> bool {
        matches!(self, PoolError::Postgres { source, .. } if crate::pg::is_gone(source))
    }
}
