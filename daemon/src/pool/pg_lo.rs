//! The large tier's team engine: each blob a PostgreSQL large object, found
//! by key in `drsd_large (key, lo, len)`. Owns its tables, the staging of
//! writes (`drsd_large_stage`), and the local spool folder where a `get`
//! lands a copy, since the large tier hands out files.
//!
//! A write goes into a fresh large object recorded as a stage row, in
//! short transactions (a download of hours must not hold one open: it would
//! stop vacuum on the whole server); the commit is one transaction that
//! takes the stage row away and records key → large object, or unlinks the
//! object when the key is there already. A writer that dies leaves a stage
//! row whose lease lapses; the next engine opened on the database removes
//! it with its object. Delete and quarantine each change the row and the
//! object in one transaction: no key ever names an object that is gone.

use std::fs::{self, File, Permissions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use postgres::{IsolationLevel, Transaction};

use super::backend::{Backend, Blob, Staged, TierStats};
use super::error::{IoContext, PoolError, Result};
use super::node_dir::NodeFile;
use crate::pg::schema::LARGE as DDL;
use crate::pg::{create_tables, is_missing_table, PgConn, PgServer};

/// A stage row untouched this long belongs to a writer that died: each
/// write renews it, so only a source silent for this long loses its stage.
const STAGE_LEASE: &str = "1 hour";
/// Bytes sent to the server per statement while staging, and read per
/// `lo_get` while spooling.
const PIECE: usize = 4 << 20;
/// A spool copy no link was made from is removed after this long: the
/// caller had it long enough to read or link it.
const SPOOL_TTL: Duration = Duration::from_secs(15 * 60);

/// Unlinks the objects of the rows a CTE named `gone` returned, where they
/// still exist (an object unlinked by hand must not fail the statement).
macro_rules! unlink_gone {
    () => {
        "SELECT count(lo_unlink(lo)) FROM gone \
         WHERE EXISTS (SELECT 1 FROM pg_largeobject_metadata m WHERE m.oid = gone.lo)"
    };
}

/// The pg-lo engine: blobs as large objects, `get` spooling a copy into a
/// local folder (read-only, so it can be hard-linked into a repo as is).
pub struct PgLoEngine {
    server: Arc<PgServer>,
    spool: PathBuf,
    tables_ready: AtomicBool,
}

impl PgLoEngine {
    /// The engine on `server`, spooling into `spool` (created, private). A
    /// stage whose writer died (lease lapsed) is removed now, with its
    /// large object.
    pub fn new(server: Arc<PgServer>, spool: &Path) -> Result<PgLoEngine> {
        crate::private::dir(spool).at("create spool folder", spool)?;
        let engine = PgLoEngine {
            server,
            spool: spool.to_path_buf(),
            tables_ready: AtomicBool::new(false),
        };
        engine.reap_stale_stages()?;
        engine.prune_spool();
        Ok(engine)
    }

    /// Connects to `url` (see [`PgServer::open`]).
    pub fn open(url: &str, spool: &Path) -> Result<PgLoEngine> {
        PgLoEngine::new(PgServer::open(url)?, spool)
    }

    /// Stage rows now: writes in flight, or dead writers' not yet reaped.
    pub fn staged(&self) -> Result<u64> {
        self.read("count stages", 0, |c| {
            let row = c
                .client
                .query_one("SELECT count(*) FROM drsd_large_stage", &[])?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn reap_stale_stages(&self) -> Result<u64> {
        let sql = format!(
            "WITH gone AS (DELETE FROM drsd_large_stage \
             WHERE touched < now() - interval '{STAGE_LEASE}' RETURNING lo) {}",
            unlink_gone!()
        );
        self.read("remove dead writers' stages", 0, |c| {
            let row = c.client.query_one(&sql, &[])?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn write<T>(
        &self,
        op: &'static str,
        mut f: impl FnMut(&mut PgConn) -> Result<T, postgres::Error>,
    ) -> Result<T> {
        self.server.with(op, |conn| {
            if !self.tables_ready.load(Ordering::Acquire) {
                create_tables(conn, DDL)?;
                self.tables_ready.store(true, Ordering::Release);
            }
            f(conn)
        })
    }

    /// A read; a database with no table yet answers `empty`.
    fn read<T>(
        &self,
        op: &'static str,
        empty: T,
        mut f: impl FnMut(&mut PgConn) -> Result<T, postgres::Error>,
    ) -> Result<T> {
        let mut empty = Some(empty);
        self.server.with(op, |conn| match f(conn) {
            Err(e) if is_missing_table(&e) => Ok(empty.take().expect("answered once")),
            other => other,
        })
    }

    /// Removes spool copies that were linked elsewhere (the link keeps the
    /// bytes) or that are older than [`SPOOL_TTL`]. Best effort.
    fn prune_spool(&self) {
        let Ok(entries) = fs::read_dir(&self.spool) else {
            return;
        };
        let now = SystemTime::now();
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            let old = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|age| age > SPOOL_TTL);
            if meta.nlink() > 1 || old {
                let _ = fs::remove_file(entry.path());
            }
        }
    }

    /// Copies large object `lo` into a fresh read-only file in the spool.
    fn spool_copy(&self, tx: &mut Transaction<'_>, key: &[u8], lo: u32) -> Result<Blob> {
        let err = self.server.error("get");
        let tmp = tempfile::Builder::new()
            .prefix(&format!("{}.", hex::encode(key)))
            .tempfile_in(&self.spool)
            .at("create spool file in", &self.spool)?;
        let mut out = std::io::BufWriter::with_capacity(PIECE, tmp.as_file());
        let stmt = tx.prepare("SELECT lo_get($1, $2, $3)").map_err(&err)?;
        let mut at = 0i64;
        loop {
            let row = tx
                .query_one(&stmt, &[&lo, &at, &(PIECE as i32)])
                .map_err(&err)?;
            let piece: &[u8] = row.get(0);
            out.write_all(piece).at("write", tmp.path())?;
            at += piece.len() as i64;
            if piece.len() < PIECE {
                break;
            }
        }
        out.flush().at("write", tmp.path())?;
        drop(out);
        let path = tmp.path().to_path_buf();
        fs::set_permissions(&path, Permissions::from_mode(0o400)).at("make read-only", &path)?;
        let file = File::open(&path).at("open", &path)?;
        tmp.into_temp_path()
            .keep()
            .map_err(|e| PoolError::Io(crate::IoError::new("keep", path.clone(), e.error)))?;
        Ok(Blob::File {
            file,
            len: at as u64,
            path,
        })
    }

    /// Stages `src` and commits it under `key`; true when this call stored it.
    fn put_from(&self, key: &[u8], src: &mut dyn Read, what: &Path) -> Result<bool> {
        let mut staged = PgLoStage::start(self)?;
        let mut buf = vec![0u8; PIECE];
        loop {
            let n = read_full(src, &mut buf).at("read", what)?;
            if n == 0 {
                break;
            }
            staged.write(&buf[..n])?;
        }
        staged.finish(key)
    }
}

/// Reads until `buf` is full or the source ends.
fn read_full(src: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl Backend for PgLoEngine {
    fn name(&self) -> &'static str {
        "pg-lo"
    }

    fn has(&self, key: &[u8]) -> Result<bool> {
        self.read("has", false, |c| {
            let stmt = c.prepare("SELECT 1 FROM drsd_large WHERE key = $1")?;
            Ok(c.client.query_opt(&stmt, &[&key])?.is_some())
        })
    }

    fn size(&self, key: &[u8]) -> Result<Option<u64>> {
        self.read("size", None, |c| {
            let stmt = c.prepare("SELECT len FROM drsd_large WHERE key = $1")?;
            let row = c.client.query_opt(&stmt, &[&key])?;
            Ok(row.map(|r| r.get::<_, i64>(0) as u64))
        })
    }

    /// A copy in the spool folder, read in one snapshot: a delete by
    /// another machine meanwhile does not cut it short.
    fn get(&self, key: &[u8]) -> Result<Option<Blob>> {
        self.prune_spool();
        let err = self.server.error("get");
        let mut conn = self.server.take("get")?;
        let mut tx = conn
            .client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(&err)?;
        let row = match tx.query_opt("SELECT lo FROM drsd_large WHERE key = $1", &[&key]) {
            Err(e) if is_missing_table(&e) => return Ok(None),
            other => other.map_err(&err)?,
        };
        let Some(row) = row else { return Ok(None) };
        let blob = self.spool_copy(&mut tx, key, row.get(0))?;
        tx.commit().map_err(&err)?;
        Ok(Some(blob))
    }

    /// `lo_get(lo, offset, len)` in one snapshot with the row: only the
    /// range crosses the network.
    fn read_range(&self, key: &[u8], offset: u64, len: u64) -> Result<Option<(Vec<u8>, u64)>> {
        let err = self.server.error("read range");
        let mut conn = self.server.take("read range")?;
        let mut tx = conn
            .client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(&err)?;
        let row = match tx.query_opt("SELECT lo, len FROM drsd_large WHERE key = $1", &[&key]) {
            Err(e) if is_missing_table(&e) => return Ok(None),
            other => other.map_err(&err)?,
        };
        let Some(row) = row else { return Ok(None) };
        let (lo, size): (u32, i64) = (row.get(0), row.get(1));
        let size = size as u64;
        let end = size.min(offset.saturating_add(len));
        let mut at = offset.min(end);
        let mut out = Vec::with_capacity((end - at) as usize);
        while at < end {
            let n = (end - at).min(i32::MAX as u64) as i32;
            let row = tx
                .query_one("SELECT lo_get($1, $2, $3)", &[&lo, &(at as i64), &n])
                .map_err(&err)?;
            let piece: &[u8] = row.get(0);
            if piece.is_empty() {
                break; // shorter than recorded: the read-out's hash will say so
            }
            out.extend_from_slice(piece);
            at += piece.len() as u64;
        }
        tx.commit().map_err(&err)?;
        Ok(Some((out, size)))
    }

    fn gets_are_copies(&self) -> bool {
        true
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        if self.has(key)? {
            return Ok(false);
        }
        self.put_from(key, &mut &value[..], Path::new("the value"))
    }

    /// Streams the file in (the database is elsewhere: no rename can take
    /// it), then removes it.
    fn adopt(&self, key: &[u8], path: &Path) -> Result<bool> {
        let stored = if self.has(key)? {
            false
        } else {
            let mut file = File::open(path).at("open", path)?;
            self.put_from(key, &mut file, path)?
        };
        fs::remove_file(path).at("remove", path)?;
        Ok(stored)
    }

    /// As [`adopt`](Self::adopt), from a file of this node's folder.
    fn adopt_at(&self, key: &[u8], file: &NodeFile, mut opened: File) -> Result<bool> {
        let stored = if self.has(key)? {
            false
        } else {
            self.put_from(key, &mut opened, &file.shown)?
        };
        file.remove().at("remove", &file.shown)?;
        Ok(stored)
    }

    /// The row and its large object go in one statement (one transaction).
    fn delete(&self, key: &[u8]) -> Result<bool> {
        const SQL: &str = concat!(
            "WITH gone AS (DELETE FROM drsd_large WHERE key = $1 RETURNING lo), ",
            "unlinked AS (",
            unlink_gone!(),
            ") SELECT (SELECT count(*) FROM gone), (SELECT * FROM unlinked)"
        );
        self.read("delete", false, |c| {
            let stmt = c.prepare(SQL)?;
            Ok(c.client.query_one(&stmt, &[&key])?.get::<_, i64>(0) > 0)
        })
    }

    /// Moves the row into `drsd_large_quarantine`, keeping its large object
    /// for a person to look at, in one statement.
    fn quarantine(&self, key: &[u8]) -> Result<Option<String>> {
        let lo = self.read("quarantine", None, |c| {
            let stmt = c.prepare(
                "WITH moved AS (DELETE FROM drsd_large WHERE key = $1 RETURNING key, lo, len) \
                 INSERT INTO drsd_large_quarantine (key, lo, len) \
                 SELECT key, lo, len FROM moved RETURNING lo",
            )?;
            let row = c.client.query_opt(&stmt, &[&key])?;
            Ok(row.map(|r| r.get::<_, u32>(0)))
        })?;
        Ok(lo.map(|lo| {
            format!(
                "large object {lo}, in the drsd_large_quarantine table of {}",
                self.server.shown()
            )
        }))
    }

    fn list(&self) -> Result<Vec<Vec<u8>>> {
        self.read("list", Vec::new(), |c| {
            let stmt = c.prepare("SELECT key FROM drsd_large")?;
            let rows = c.client.query(&stmt, &[])?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    fn stage(&self) -> Result<Box<dyn Staged + '_>> {
        Ok(Box::new(PgLoStage::start(self)?))
    }

    fn stats(&self) -> Result<TierStats> {
        self.read("stats", TierStats::default(), |c| {
            let row = c.client.query_one(
                "SELECT count(*), coalesce(sum(len), 0)::bigint FROM drsd_large",
                &[],
            )?;
            Ok(TierStats {
                entries: row.get::<_, i64>(0) as u64,
                bytes: row.get::<_, i64>(1) as u64,
            })
        })
    }
}

/// A write in progress: a large object and its stage row, filled piece by
/// piece. Dropped uncommitted, both go.
struct PgLoStage<'a> {
    engine: &'a PgLoEngine,
    lo: u32,
    buf: Vec<u8>,
    written: u64,
    done: bool,
}

impl<'a> PgLoStage<'a> {
    fn start(engine: &'a PgLoEngine) -> Result<PgLoStage<'a>> {
        let lo = engine.write("stage", |c| {
            let stmt =
                c.prepare("INSERT INTO drsd_large_stage (lo) VALUES (lo_create(0)) RETURNING lo")?;
            Ok(c.client.query_one(&stmt, &[])?.get::<_, u32>(0))
        })?;
        Ok(PgLoStage {
            engine,
            lo,
            buf: Vec::with_capacity(PIECE),
            written: 0,
            done: false,
        })
    }

    /// Sends the buffered bytes, renewing the stage's lease; fails when the
    /// stage was reaped (its writer silent past the lease).
    fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let (lo, at, piece) = (self.lo, self.written as i64, &self.buf[..]);
        let sent = self.engine.write("stage", |c| {
            let stmt = c.prepare(
                "WITH t AS (UPDATE drsd_large_stage SET touched = now() WHERE lo = $1 RETURNING lo) \
                 SELECT lo_put(lo, $2, $3) FROM t",
            )?;
            c.client.execute(&stmt, &[&lo, &at, &piece])
        })?;
        if sent == 0 {
            return Err(PoolError::StageLost {
                what: format!("large object {lo} on {}", self.engine.server.shown()),
            });
        }
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Records `key` → the staged object in one transaction, or, when the
    /// key is there already, unlinks the object instead. True when stored.
    fn finish(mut self, key: &[u8]) -> Result<bool> {
        self.flush()?;
        let (lo, len) = (self.lo, self.written as i64);
        let stored = self.engine.write("commit", |c| {
            let mut tx = c.client.transaction()?;
            let mine = tx.execute("DELETE FROM drsd_large_stage WHERE lo = $1", &[&lo])?;
            if mine == 0 {
                return Ok(None);
            }
            let stored = tx.execute(
                "INSERT INTO drsd_large (key, lo, len) VALUES ($1, $2, $3) \
                 ON CONFLICT (key) DO NOTHING",
                &[&key, &lo, &len],
            )? > 0;
            if !stored {
                tx.execute("SELECT lo_unlink($1)", &[&lo])?;
            }
            tx.commit()?;
            Ok(Some(stored))
        })?;
        self.done = true;
        stored.ok_or_else(|| PoolError::StageLost {
            what: format!("large object {lo} on {}", self.engine.server.shown()),
        })
    }
}

impl Staged for PgLoStage<'_> {
    fn write(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            let room = PIECE - self.buf.len();
            let (now, rest) = bytes.split_at(room.min(bytes.len()));
            self.buf.extend_from_slice(now);
            bytes = rest;
            if self.buf.len() == PIECE {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn commit(self: Box<Self>, key: &[u8]) -> Result<()> {
        self.finish(key).map(drop)
    }
}

impl Drop for PgLoStage<'_> {
    /// Best effort: what a failure here leaves, the lease reaps later.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let sql = concat!(
            "WITH gone AS (DELETE FROM drsd_large_stage WHERE lo = $1 RETURNING lo) ",
            unlink_gone!()
        );
        let lo = self.lo;
        let _ = self.engine.read("drop stage", 0i64, |c| {
            let stmt = c.prepare(sql)?;
            Ok(c.client.query_one(&stmt, &[&lo])?.get::<_, i64>(0))
        });
    }
}
