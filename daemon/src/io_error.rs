//! The one I/O error shape: what was being done, to which path, and what
//! the OS said. Module error enums carry it (`#[error(transparent)]
//! Io(#[from] IoError)`) instead of each declaring its own
//! `Io { op, path, source }` variant, so every I/O failure reads the same:
//! `create temp file in /x/y: Permission denied (os error 13)`.
//! [`out_of_space`] tells a full disk anywhere in an error's causes.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("{op} {}: {source}", path.display())]
pub struct IoError {
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl IoError {
    pub fn new(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> IoError {
        IoError {
            op,
            path: path.into(),
            source,
        }
    }

    /// For `map_err`: `fs::read(p).map_err(IoError::at("read", p))?`.
    pub fn at(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> IoError {
        let path = path.to_path_buf();
        move |source| IoError { op, path, source }
    }

    pub fn kind(&self) -> std::io::ErrorKind {
        self.source.kind()
    }
}

/// Whether `error` or one of its causes is a full file system: an I/O error
/// `ENOSPC` / `EDQUOT` (`StorageFull`, `QuotaExceeded`), or SQLite's
/// "database or disk is full".
pub fn out_of_space(error: &(dyn std::error::Error + 'static)) -> bool {
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

    #[test]
    fn the_message_names_the_operation_the_path_and_the_cause() {
        let err = std::fs::read("/nonexistent/x")
            .map_err(IoError::at("read", Path::new("/nonexistent/x")))
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        let text = err.to_string();
        assert!(text.starts_with("read /nonexistent/x: "), "{text}");
    }
}
