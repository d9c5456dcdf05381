//! The kv tier's team engine: small blobs as `bytea` rows of one PostgreSQL
//! table, so every machine of a lab reads and writes one store. Owns its
//! tables (`drsd_kv`, and `drsd_kv_quarantine` for entries moved aside);
//! connections and URL handling are [`super::pg`]'s.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::backend::{Backend, Blob, MemStage, Staged, TierStats};
use super::error::Result;
use crate::pg::schema::KV as DDL;
use crate::pg::{create_tables, is_missing_table, PgConn, PgServer};

const PUT: &str = "INSERT INTO drsd_kv (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";
/// A whole batch in one statement (one round trip, one transaction); the
/// keys it stored come back.
const PUT_MANY: &str = "INSERT INTO drsd_kv (key, value) \
    SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (key) DO NOTHING RETURNING key";

/// Rows a `scan` fetches at a time, so a verify never holds the table in memory.
const SCAN_ROWS: i32 = 256;

/// The postgres kv engine: `drsd_kv (key bytea PRIMARY KEY, value bytea)`.
/// A put is one autocommitted `INSERT … ON CONFLICT DO NOTHING`, a batch
/// one statement; durability is the server's (`synchronous_commit`).
pub struct PgKvEngine {
    server: Arc<PgServer>,
    tables_ready: AtomicBool,
    commits: AtomicU64,
}

impl PgKvEngine {
    /// The engine on `server`. Creates nothing until the first write: a
    /// database without the tables reads as an empty store.
    pub fn new(server: Arc<PgServer>) -> PgKvEngine {
        PgKvEngine {
            server,
            tables_ready: AtomicBool::new(false),
            commits: AtomicU64::new(0),
        }
    }

    /// Connects to `url` (see [`PgServer::open`]).
    pub fn open(url: &str) -> Result<PgKvEngine> {
        PgServer::open(url).map(PgKvEngine::new)
    }

    /// A write on a connection, the tables made first when needed.
    fn write<T>(
        &self,
        op: &'static str,
        mut f: impl FnMut(&mut PgConn) -> Result<T, postgres::Error>,
    ) -> Result<T> {
        let out = self.server.with(op, |conn| {
            if !self.tables_ready.load(Ordering::Acquire) {
                create_tables(conn, DDL)?;
                self.tables_ready.store(true, Ordering::Release);
            }
            f(conn)
        })?;
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(out)
    }

    /// A read; a database with no table yet answers `empty`.
    fn read<T>(
        &self,
        op: &'static str,
        empty: T,
        f: impl FnMut(&mut PgConn) -> Result<T, postgres::Error>,
    ) -> Result<T> {
        let mut f = f;
        let mut empty = Some(empty);
        self.server.with(op, |conn| match f(conn) {
            Err(e) if is_missing_table(&e) => Ok(empty.take().expect("answered once")),
            other => other,
        })
    }
}

impl Backend for PgKvEngine {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn has(&self, key: &[u8]) -> Result<bool> {
        self.read("has", false, |c| {
            let stmt = c.prepare("SELECT 1 FROM drsd_kv WHERE key = $1")?;
            Ok(c.client.query_opt(&stmt, &[&key])?.is_some())
        })
    }

    fn size(&self, key: &[u8]) -> Result<Option<u64>> {
        self.read("size", None, |c| {
            let stmt =
                c.prepare("SELECT octet_length(value)::bigint FROM drsd_kv WHERE key = $1")?;
            let row = c.client.query_opt(&stmt, &[&key])?;
            Ok(row.map(|r| r.get::<_, i64>(0) as u64))
        })
    }

    fn get(&self, key: &[u8]) -> Result<Option<Blob>> {
        self.read("get", None, |c| {
            let stmt = c.prepare("SELECT value FROM drsd_kv WHERE key = $1")?;
            let row = c.client.query_opt(&stmt, &[&key])?;
            Ok(row.map(|r| Blob::Bytes(r.get(0))))
        })
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.write("put", |c| {
            let stmt = c.prepare(PUT)?;
            Ok(c.client.execute(&stmt, &[&key, &value])? > 0)
        })
    }

    fn put_many(&self, entries: &[(&[u8], &[u8])]) -> Result<Vec<bool>> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<&[u8]> = entries.iter().map(|(k, _)| *k).collect();
        let values: Vec<&[u8]> = entries.iter().map(|(_, v)| *v).collect();
        let stored: HashSet<Vec<u8>> = self.write("put", |c| {
            let stmt = c.prepare(PUT_MANY)?;
            let rows = c.client.query(&stmt, &[&keys, &values])?;
            Ok(rows.iter().map(|r| r.get::<_, Vec<u8>>(0)).collect())
        })?;
        // A key twice in one batch was stored by its first occurrence.
        let mut seen = HashSet::new();
        Ok(keys
            .iter()
            .map(|k| stored.contains(*k) && seen.insert(*k))
            .collect())
    }

    fn write_transactions(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    fn delete(&self, key: &[u8]) -> Result<bool> {
        self.read("delete", false, |c| {
            let stmt = c.prepare("DELETE FROM drsd_kv WHERE key = $1")?;
            Ok(c.client.execute(&stmt, &[&key])? > 0)
        })
    }

    /// One statement: the batch is one commit.
    fn delete_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<u64>>> {
        let gone: std::collections::HashMap<Vec<u8>, u64> =
            self.read("delete", Default::default(), |c| {
                let stmt = c.prepare(
                    "DELETE FROM drsd_kv WHERE key = ANY($1::bytea[]) \
                 RETURNING key, octet_length(value)::bigint",
                )?;
                let rows = c.client.query(&stmt, &[&keys])?;
                Ok(rows
                    .iter()
                    .map(|r| (r.get::<_, Vec<u8>>(0), r.get::<_, i64>(1) as u64))
                    .collect())
            })?;
        Ok(keys.iter().map(|k| gone.get(*k).copied()).collect())
    }

    /// Moves the row into `drsd_kv_quarantine`, in one statement (one
    /// transaction): it is in exactly one of the two tables at any time.
    fn quarantine(&self, key: &[u8]) -> Result<Option<String>> {
        let moved = self.read("quarantine", 0, |c| {
            let stmt = c.prepare(
                "WITH moved AS (DELETE FROM drsd_kv WHERE key = $1 RETURNING key, value) \
                 INSERT INTO drsd_kv_quarantine (key, value) SELECT key, value FROM moved",
            )?;
            c.client.execute(&stmt, &[&key])
        })?;
        Ok((moved > 0).then(|| format!("the drsd_kv_quarantine table of {}", self.server.shown())))
    }

    /// Through a cursor, [`SCAN_ROWS`] rows at a time, in one snapshot.
    fn scan(&self, each: &mut dyn FnMut(Vec<u8>, Blob) -> Result<()>) -> Result<()> {
        let mut conn = self.server.take("verify")?;
        let err = self.server.error("verify");
        let mut tx = conn.client.transaction().map_err(&err)?;
        let portal = match tx.bind("SELECT key, value FROM drsd_kv", &[]) {
            Err(e) if is_missing_table(&e) => return Ok(()),
            other => other.map_err(&err)?,
        };
        loop {
            let rows = tx.query_portal(&portal, SCAN_ROWS).map_err(&err)?;
            if rows.is_empty() {
                break;
            }
            for row in rows {
                each(row.get(0), Blob::Bytes(row.get(1)))?;
            }
        }
        tx.commit().map_err(&err)
    }

    fn list(&self) -> Result<Vec<Vec<u8>>> {
        self.read("list", Vec::new(), |c| {
            let stmt = c.prepare("SELECT key FROM drsd_kv")?;
            let rows = c.client.query(&stmt, &[])?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    fn stage(&self) -> Result<Box<dyn Staged + '_>> {
        Ok(Box::new(MemStage {
            engine: self,
            buf: Vec::new(),
        }))
    }

    fn stats(&self) -> Result<TierStats> {
        self.read("stats", TierStats::default(), |c| {
            let row = c.client.query_one(
                "SELECT count(*), coalesce(sum(octet_length(value)), 0)::bigint FROM drsd_kv",
                &[],
            )?;
            Ok(TierStats {
                entries: row.get::<_, i64>(0) as u64,
                bytes: row.get::<_, i64>(1) as u64,
            })
        })
    }
}
