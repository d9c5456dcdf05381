//! What can go wrong in the foreign-object service: the request's fault
//! (`Refused`, `NotInRepo`) or the daemon's (the rest). The server's
//! `wire_error` gives each its wire code.

use crate::git::GitError;
use crate::lfs::track::TrackError;
use crate::pool::PoolError;
use crate::registry::RegistryError;

#[derive(Debug, thiserror::Error)]
pub enum ForeignError {
    /// The request cannot be done as asked (the message says why).
    #[error("{0}")]
    Refused(String),
    /// The client's folder is not in a git work tree.
    #[error(transparent)]
    NotInRepo(GitError),
    /// git could not tell a registered repo's folders.
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Track(#[from] TrackError),
    #[error(transparent)]
    Pool(#[from] PoolError),
}
