//! [`OwnPoolReader`]: this machine's own pool (what the daemon opens without
//! a team: `kv.sqlite` and `large/` in the pool folder) read without
//! changing anything in it, for `drsctl team join`. The SQLite database is
//! opened read-only and no folder, lock or stage file is made: a join that
//! is killed, or refused, leaves the own pool as it found it.

use std::fs::File;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::error::{IoContext, PoolError, Result};
use super::local::{key_path, list_keys};

/// This machine's own pool, read-only.
pub struct OwnPoolReader {
    kv_path: PathBuf,
    /// `None` when the pool never held a kv entry (no database file).
    kv: Option<Connection>,
    large: PathBuf,
}

/// A large entry of the own pool: its key and open file.
pub struct OwnFile {
    pub key: Vec<u8>,
    pub path: PathBuf,
    pub file: File,
    pub len: u64,
}

impl OwnPoolReader {
    /// The pool in `dir`; a folder without a pool reads as an empty one.
    pub fn open(dir: &Path) -> Result<OwnPoolReader> {
        let kv_path = dir.join("kv.sqlite");
        let kv = match kv_path.exists() {
            true => Some(
                Connection::open_with_flags(
                    &kv_path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .map_err(|source| PoolError::Sqlite {
                    op: "open read-only",
                    path: kv_path.clone(),
                    source,
                })?,
            ),
            false => None,
        };
        Ok(OwnPoolReader {
            kv_path,
            kv,
            large: dir.join("large"),
        })
    }

    /// Up to `limit` kv entries in key order, from the first key after
    /// `after` (so a caller walks the table in pages, never holding it whole).
    pub fn kv_page(&self, after: Option<&[u8]>, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let Some(conn) = &self.kv else {
            return Ok(Vec::new());
        };
        let err = |source| PoolError::Sqlite {
            op: "read",
            path: self.kv_path.clone(),
            source,
        };
        let has_table = conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'blobs'",
                [],
                |_| Ok(()),
            )
            .optional()
            .map_err(err)?
            .is_some();
        if !has_table {
            return Ok(Vec::new());
        }
        let mut stmt = conn
            .prepare_cached("SELECT key, value FROM blobs WHERE key > ?1 ORDER BY key LIMIT ?2")
            .map_err(err)?;
        let rows = stmt
            .query_map(rusqlite::params![after.unwrap_or(&[]), limit as i64], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .map_err(err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(err)
    }

    /// The keys of the large tier's files.
    pub fn large_keys(&self) -> Result<Vec<Vec<u8>>> {
        if !self.large.is_dir() {
            return Ok(Vec::new());
        }
        list_keys(&self.large)
    }

    /// The large entry `key`, opened for reading; `None` when gone.
    pub fn large_file(&self, key: &[u8]) -> Result<Option<OwnFile>> {
        let path = key_path(&self.large, key);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).at("open", path),
        };
        let len = file.metadata().at("stat", &path)?.len();
        Ok(Some(OwnFile {
            key: key.to_vec(),
            path,
            file,
            len,
        }))
    }
}
