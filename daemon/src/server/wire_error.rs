//! Errors as they leave the daemon: the one place that says which
//! [`ErrorCode`] a failure travels with, so a full disk reads `no_space`
//! whichever operation ran into it.

use crate::io_error::out_of_space;
use crate::ops::gc::GcError;
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

impl From<GcError> for WireError {
    fn from(e: GcError) -> WireError {
        match &e {
            GcError::NoRepos { .. } => WireError::new(ErrorCode::InvalidArgument, e.to_string()),
            GcError::Unreadable { .. } => WireError::new(ErrorCode::NotFound, e.to_string()),
            GcError::Pool(_) | GcError::Registry(_) => wire_error(ErrorCode::Internal, &e),
            GcError::Partials(_) => WireError::new(ErrorCode::Internal, e.to_string()),
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
