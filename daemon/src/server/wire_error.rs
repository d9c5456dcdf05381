//! Errors as they leave the daemon: the one place that says which
//! [`ErrorCode`] a failure travels with, so a full disk reads `no_space`
//! whichever operation ran into it. Each service fails with its own error
//! (`TransferError`, `RepoError`, `GcError`, `ForeignError`); they become
//! `WireError`s here and nowhere else.

use crate::io_error::out_of_space;
use crate::ops::foreign::ForeignError;
use crate::ops::gc::{ForgetError, GcError};
use crate::ops::prune::PruneError;
use crate::ops::repos::RepoError;
use crate::ops::team::MigrateError;
use crate::ops::transfer::TransferError;
use crate::remote::{PointerFetchError, UploadError};
use drsd_proto::{ErrorCode, WireError};

/// `error` as it travels: `code`, unless a full file system is behind it
/// (anywhere in its chain of causes), which is `no_space` whatever the
/// operation was: the one thing the user can do is free space.
pub(crate) fn wire_error(code: ErrorCode, error: &(dyn std::error::Error + 'static)) -> WireError {
    let code = if out_of_space(error) {
        ErrorCode::NoSpace
    } else {
        code
    };
    WireError::new(code, error.to_string())
}

impl From<TransferError> for WireError {
    fn from(e: TransferError) -> WireError {
        WireError::new(transfer_code(&e), e.to_string())
    }
}

/// A transfer's failure as the agent and the hooks hear it: the request's
/// or the repo's fault is `invalid_argument`, an object nowhere to be had
/// `not_found`, the rest `internal`; a full disk behind it `no_space`. A
/// failure on top of another travels with the code of the last one.
fn transfer_code(e: &TransferError) -> ErrorCode {
    use TransferError as E;
    if e.is_out_of_space() {
        return ErrorCode::NoSpace;
    }
    match e {
        E::Elsewhere { missing, .. } => transfer_code(missing),
        E::Refetch { then, .. } | E::AroundPool { then, .. } => transfer_code(then),
        E::Fetch(f) => match f {
            PointerFetchError::Setup(_) | PointerFetchError::WrongSize { .. } => {
                ErrorCode::InvalidArgument
            }
            PointerFetchError::Missing { .. } => ErrorCode::NotFound,
            PointerFetchError::Head(_)
            | PointerFetchError::Fetch(_)
            | PointerFetchError::Dir(_) => ErrorCode::Internal,
        },
        E::UploadFile(UploadError::NotTheObject { .. }) => ErrorCode::InvalidArgument,
        E::NoObjectRemote { .. }
        | E::BadObjectRemote(_)
        | E::NotInRepo(_)
        | E::Settings(_)
        | E::Pointers(_)
        | E::NotTheObject { .. }
        | E::WrongSize { .. }
        | E::S3Setup(_)
        | E::IndexdNeedsS3 { .. }
        | E::Drs(_)
        | E::UntrustedIndexd { .. }
        | E::Commons(_)
        | E::CommonsWithoutProject { .. } => ErrorCode::InvalidArgument,
        E::NotHere { .. } => ErrorCode::NotFound,
        E::LfsTmp(_)
        | E::HandOut(_)
        | E::Pool(_)
        | E::Export(_)
        | E::LeftThePool { .. }
        | E::UploadFile(_)
        | E::UploadPooled(_)
        | E::Registry(_) => ErrorCode::Internal,
    }
}

impl From<RepoError> for WireError {
    fn from(e: RepoError) -> WireError {
        match e {
            RepoError::Foreign(e) => e.into(),
            RepoError::NotInRepo(_) | RepoError::Setup(_) => {
                wire_error(ErrorCode::InvalidArgument, &e)
            }
            RepoError::NotRegistered { .. } => WireError::new(ErrorCode::NotFound, e.to_string()),
            RepoError::Save(_) => wire_error(ErrorCode::Internal, &e),
            RepoError::RemoteText(_)
            | RepoError::IndexdText(_)
            | RepoError::AuthzText(_)
            | RepoError::Gen3WithoutProject
            | RepoError::Unusable { .. } => {
                WireError::new(ErrorCode::InvalidArgument, e.to_string())
            }
        }
    }
}

/// The foreign-object service's failures: the request's fault
/// (`invalid_argument`), or the daemon's (`internal`, `no_space` when a
/// full disk is behind it).
impl From<ForeignError> for WireError {
    fn from(e: ForeignError) -> WireError {
        match e {
            ForeignError::Refused(why) => WireError::new(ErrorCode::InvalidArgument, why),
            ForeignError::NotInRepo(e) => wire_error(ErrorCode::InvalidArgument, &e),
            other => wire_error(ErrorCode::Internal, &other),
        }
    }
}

impl From<GcError> for WireError {
    fn from(e: GcError) -> WireError {
        match &e {
            GcError::NoRepos { .. } => WireError::new(ErrorCode::InvalidArgument, e.to_string()),
            GcError::Unreadable { .. } => WireError::new(ErrorCode::NotFound, e.to_string()),
            GcError::Pool(_) | GcError::Registry(_) => wire_error(ErrorCode::Internal, &e),
            GcError::Partials(_) => WireError::new(ErrorCode::Internal, e.to_string()),
            GcError::Roots(_) => wire_error(ErrorCode::Internal, &e),
        }
    }
}

impl From<PruneError> for WireError {
    fn from(e: PruneError) -> WireError {
        match &e {
            PruneError::NoRepos | PruneError::NotInRepo(_) | PruneError::Settings { .. } => {
                WireError::new(ErrorCode::InvalidArgument, e.to_string())
            }
            PruneError::Unreadable { .. } => WireError::new(ErrorCode::NotFound, e.to_string()),
            PruneError::Registry(_)
            | PruneError::Pool(_)
            | PruneError::Io(_)
            | PruneError::Unsafe(_) => wire_error(ErrorCode::Internal, &e),
        }
    }
}

impl From<MigrateError> for WireError {
    fn from(e: MigrateError) -> WireError {
        match e {
            MigrateError::NotInTeam { .. } | MigrateError::Busy => {
                WireError::new(ErrorCode::InvalidArgument, e.to_string())
            }
            _ => wire_error(ErrorCode::Internal, &e),
        }
    }
}

impl From<ForgetError> for WireError {
    fn from(e: ForgetError) -> WireError {
        match &e {
            ForgetError::Own { .. } => WireError::new(ErrorCode::InvalidArgument, e.to_string()),
            ForgetError::Live { .. } => WireError::new(ErrorCode::InvalidArgument, e.to_string()),
            ForgetError::Unknown { .. } => WireError::new(ErrorCode::NotFound, e.to_string()),
            ForgetError::Roots(_) => wire_error(ErrorCode::Internal, &e),
            ForgetError::Nodes(_) => wire_error(ErrorCode::Internal, &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::PoolError;

    #[test]
    fn a_full_disk_anywhere_in_the_cause_chain_is_no_space() {
        let full = PoolError::Io(crate::IoError::new(
            "write",
            "/pool/large/stage/x",
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        ));
        let wire = wire_error(ErrorCode::InvalidArgument, &full);
        assert_eq!(wire.code, ErrorCode::NoSpace);
        assert!(
            wire.message.contains("/pool/large/stage/x"),
            "{}",
            wire.message
        );
        let sqlite = PoolError::Sqlite {
            op: "put",
            path: "/pool/kv.sqlite".into(),
            source: rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                None,
            ),
        };
        assert_eq!(
            wire_error(ErrorCode::Internal, &sqlite).code,
            ErrorCode::NoSpace
        );
        let other = PoolError::Io(crate::IoError::new(
            "open",
            "/x",
            std::io::Error::from_raw_os_error(libc::EACCES),
        ));
        assert_eq!(
            wire_error(ErrorCode::Internal, &other).code,
            ErrorCode::Internal
        );
        assert_eq!(ErrorCode::NoSpace.to_string(), "no_space");
    }
}
