//! Errors as they leave the daemon: the one place that says which
//! [`ErrorCode`] a failure travels with, so a full disk reads `no_space`
//! whichever operation ran into it.

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

/// Whether `error` or one of its causes is a full file system: an I/O error
/// `ENOSPC` / `EDQUOT` (`StorageFull`, `QuotaExceeded`), or SQLite's
/// "database or disk is full".
pub(crate) fn out_of_space(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            let full = matches!(
                io.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ) || matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
            if full {
                return true;
            }
        }
        if let Some(rusqlite::Error::SqliteFailure(f, _)) = e.downcast_ref::<rusqlite::Error>() {
            if f.code == rusqlite::ErrorCode::DiskFull {
                return true;
            }
        }
        next = e.source();
    }
    false
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
