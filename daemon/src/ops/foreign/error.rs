//! What can go wrong in the foreign-object service, and the one place its
//! failures get their wire code: the request's fault (`invalid_argument`),
//! or the daemon's (`internal`, `no_space` when a full disk is behind it).

use crate::git::GitError;
use crate::lfs::track::TrackError;
use crate::pool::PoolError;
use crate::registry::RegistryError;
use drsd_proto::{ErrorCode, WireError};

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

impl From<ForeignError> for WireError {
    fn from(e: ForeignError) -> WireError {
        match e {
            ForeignError::Refused(why) => WireError::new(ErrorCode::InvalidArgument, why),
            ForeignError::NotInRepo(e) => {
                crate::server::wire_error::wire_error(ErrorCode::InvalidArgument, &e)
            }
            other => crate::server::wire_error::wire_error(ErrorCode::Internal, &other),
        }
    }
}
