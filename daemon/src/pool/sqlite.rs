//! The kv tier's default engine: small blobs as rows of one SQLite table.
//! Thousands of tiny objects cost one file, not thousands. Owns the
//! database's connection handling (one writer, pooled readers), WAL
//! checkpointing off the request path, and compaction after a gc.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use super::backend::{Backend, Blob, MemStage, Staged, TierStats};
use super::error::{PoolError, Result};
use crate::lock::lock;

const CREATE: &str =
    "CREATE TABLE IF NOT EXISTS blobs (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL)";
/// Entries whose bytes did not match their key, moved out of `blobs`. No
/// primary key: one oid may go bad more than once. `at`: Unix seconds.
const CREATE_QUARANTINE: &str = "CREATE TABLE IF NOT EXISTS quarantine \
     (key BLOB NOT NULL, value BLOB NOT NULL, at INTEGER NOT NULL)";

/// The default kv engine: one SQLite database in WAL mode with
/// `synchronous=NORMAL` (a commit is durable once the WAL is checkpointed or
/// the OS flushes it; a crash can lose the last commits but never corrupts).
/// One writer connection; readers take pooled connections, so reads run
/// beside a write.
pub struct SqliteEngine {
    path: PathBuf,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
    table_ready: AtomicBool,
    // Wakes the checkpointer; dropping it ends the checkpointer's thread.
    checkpoint: mpsc::SyncSender<()>,
    commits: AtomicU64,
}

/// Free space below which [`SqliteEngine::compact`] leaves the file alone.
const COMPACT_MIN_BYTES: i64 = 1 << 20;
/// Commits between nudges to the background checkpointer.
const CHECKPOINT_EVERY: u64 = 256;
/// WAL pages at which a writer checkpoints by itself: only reached when the
/// background checkpointer falls behind.
const WAL_SAFETY_PAGES: i64 = 16_384;

impl SqliteEngine {
    pub fn open(path: &Path) -> Result<SqliteEngine> {
        let writer = Self::connect(path)?;
        writer
            .pragma_update(None, "wal_autocheckpoint", WAL_SAFETY_PAGES)
            .map_err(|source| PoolError::Sqlite {
                op: "configure",
                path: path.to_path_buf(),
                source,
            })?;
        let engine = SqliteEngine {
            path: path.to_path_buf(),
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
            table_ready: AtomicBool::new(false),
            checkpoint: spawn_checkpointer(Self::connect(path)?),
            commits: AtomicU64::new(0),
        };
        Ok(engine)
    }

    fn connect(path: &Path) -> Result<Connection> {
        let err = |source| PoolError::Sqlite {
            op: "open",
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(Duration::from_secs(30)).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(err)?;
        Ok(conn)
    }

    fn error(&self, op: &'static str) -> impl Fn(rusqlite::Error) -> PoolError + '_ {
        move |source| PoolError::Sqlite {
            op,
            path: self.path.clone(),
            source,
        }
    }

    /// Runs a read on a pooled connection. A database with no table yet
    /// reads as an empty store: `empty` is the answer then.
    fn read<T>(
        &self,
        op: &'static str,
        empty: T,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        let conn = match lock(&self.readers).pop() {
            Some(conn) => conn,
            None => Self::connect(&self.path)?,
        };
        let out = f(&conn);
        lock(&self.readers).push(conn);
        match out {
            Err(e) if is_missing_table(&e) => Ok(empty),
            other => other.map_err(self.error(op)),
        }
    }

    /// Counts a commit, nudging the background checkpointer now and then.
    fn committed(&self) {
        if self.commits.fetch_add(1, Ordering::Relaxed) % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1 {
            let _ = self.checkpoint.try_send(()); // one nudge pending is enough
        }
    }

    fn ensure_table(&self, conn: &Connection) -> Result<()> {
        if !self.table_ready.load(Ordering::Acquire) {
            conn.execute(CREATE, [])
                .map_err(self.error("create table"))?;
            self.table_ready.store(true, Ordering::Release);
        }
        Ok(())
    }
}

/// Copies the WAL back into the database off the put path: with
/// `synchronous=NORMAL` a checkpoint is the only write that fsyncs, and a
/// put should not wait for it.
fn spawn_checkpointer(conn: Connection) -> mpsc::SyncSender<()> {
    let (tx, rx) = mpsc::sync_channel::<()>(1);
    std::thread::Builder::new()
        .name("sqlite-checkpoint".into())
        .spawn(move || {
            while rx.recv().is_ok() {
                // PASSIVE never blocks the writer or readers; a failure
                // only leaves the WAL longer until the next try.
                let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
        })
        .expect("spawn the sqlite checkpoint thread");
    tx
}

fn is_missing_table(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(_, Some(msg)) if msg.starts_with("no such table"))
}

impl Backend for SqliteEngine {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn has(&self, key: &[u8]) -> Result<bool> {
        self.read("has", false, |c| {
            c.prepare_cached("SELECT 1 FROM blobs WHERE key = ?1")?
                .exists([key])
        })
    }

    fn size(&self, key: &[u8]) -> Result<Option<u64>> {
        self.read("size", None, |c| {
            c.prepare_cached("SELECT length(value) FROM blobs WHERE key = ?1")?
                .query_row([key], |r| r.get::<_, u64>(0))
                .optional()
        })
    }

    fn get(&self, key: &[u8]) -> Result<Option<Blob>> {
        let value = self.read("get", None, |c| {
            c.prepare_cached("SELECT value FROM blobs WHERE key = ?1")?
                .query_row([key], |r| r.get::<_, Vec<u8>>(0))
                .optional()
        })?;
        Ok(value.map(Blob::Bytes))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let conn = lock(&self.writer);
        self.ensure_table(&conn)?;
        let changed = conn
            .prepare_cached("INSERT OR IGNORE INTO blobs (key, value) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![key, value]))
            .map_err(self.error("put"))?;
        drop(conn);
        self.committed();
        Ok(changed > 0)
    }

    fn put_many(&self, entries: &[(&[u8], &[u8])]) -> Result<Vec<bool>> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = lock(&self.writer);
        self.ensure_table(&conn)?;
        let stored = (|| {
            let tx = conn.transaction()?;
            let mut stored = Vec::with_capacity(entries.len());
            {
                let mut insert =
                    tx.prepare_cached("INSERT OR IGNORE INTO blobs (key, value) VALUES (?1, ?2)")?;
                for (key, value) in entries {
                    stored.push(insert.execute(params![key, value])? > 0);
                }
            }
            tx.commit()?;
            Ok(stored)
        })()
        .map_err(self.error("put"))?;
        drop(conn);
        self.committed();
        Ok(stored)
    }

    fn write_transactions(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    fn delete(&self, key: &[u8]) -> Result<bool> {
        let conn = lock(&self.writer);
        let out = conn
            .prepare_cached("DELETE FROM blobs WHERE key = ?1")
            .and_then(|mut s| s.execute([key]));
        match out {
            Err(e) if is_missing_table(&e) => Ok(false),
            other => Ok(other.map_err(self.error("delete"))? > 0),
        }
    }

    /// Copies the row into the `quarantine` table and deletes it from
    /// `blobs`, in one transaction.
    fn quarantine(&self, key: &[u8]) -> Result<Option<String>> {
        let mut conn = lock(&self.writer);
        self.ensure_table(&conn)?;
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let moved = (|| {
            let tx = conn.transaction()?;
            tx.execute(CREATE_QUARANTINE, [])?;
            let moved = tx.execute(
                "INSERT INTO quarantine (key, value, at) \
                 SELECT key, value, ?2 FROM blobs WHERE key = ?1",
                params![key, at],
            )?;
            tx.execute("DELETE FROM blobs WHERE key = ?1", [key])?;
            tx.commit()?;
            Ok(moved)
        })()
        .map_err(self.error("quarantine"))?;
        Ok((moved > 0).then(|| format!("the quarantine table of {}", self.path.display())))
    }

    /// Through a connection opened for the scan: a pooled one keeps the
    /// pages it read before and trusts them while the WAL shows no commit,
    /// so it would not see bytes that changed in the file underneath.
    fn scan(&self, each: &mut dyn FnMut(Vec<u8>, Blob) -> Result<()>) -> Result<()> {
        let conn = Self::connect(&self.path)?;
        let mut stmt = match conn.prepare("SELECT key, value FROM blobs") {
            Err(e) if is_missing_table(&e) => return Ok(()),
            other => other.map_err(self.error("verify"))?,
        };
        let mut rows = stmt.query([]).map_err(self.error("verify"))?;
        while let Some(row) = rows.next().map_err(self.error("verify"))? {
            let key: Vec<u8> = row.get(0).map_err(self.error("verify"))?;
            let value: Vec<u8> = row.get(1).map_err(self.error("verify"))?;
            each(key, Blob::Bytes(value))?;
        }
        Ok(())
    }

    fn list(&self) -> Result<Vec<Vec<u8>>> {
        self.read("list", Vec::new(), |c| {
            let mut stmt = c.prepare_cached("SELECT key FROM blobs")?;
            let keys = stmt.query_map([], |r| r.get::<_, Vec<u8>>(0))?;
            keys.collect()
        })
    }

    fn stage(&self) -> Result<Box<dyn Staged + '_>> {
        Ok(Box::new(MemStage {
            engine: self,
            buf: Vec::new(),
        }))
    }

    /// VACUUM, when free pages are a quarter of the file and 1 MiB or more
    /// (gc is the caller: puts wait meanwhile), then a WAL checkpoint that
    /// truncates, so the file on disk shrinks.
    fn compact(&self) -> Result<u64> {
        let conn = lock(&self.writer);
        let pages = |what: &str| -> rusqlite::Result<i64> {
            conn.query_row(&format!("PRAGMA {what}"), [], |r| r.get(0))
        };
        let measure = || -> rusqlite::Result<(i64, i64, i64)> {
            Ok((
                pages("page_count")?,
                pages("freelist_count")?,
                pages("page_size")?,
            ))
        };
        let (before, free, size) = measure().map_err(self.error("compact"))?;
        if free * 4 < before || free * size < COMPACT_MIN_BYTES {
            return Ok(0);
        }
        conn.execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")
            .map_err(self.error("compact"))?;
        let (after, _, _) = measure().map_err(self.error("compact"))?;
        Ok(((before - after).max(0) * size) as u64)
    }

    fn stats(&self) -> Result<TierStats> {
        self.read("stats", TierStats::default(), |c| {
            c.query_row(
                "SELECT count(*), coalesce(sum(length(value)), 0) FROM blobs",
                [],
                |r| {
                    Ok(TierStats {
                        entries: r.get(0)?,
                        bytes: r.get(1)?,
                    })
                },
            )
        })
    }
}
