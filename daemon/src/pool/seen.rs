//! When a gc last saw each pool entry referenced, so a gc removes only
//! entries no repo has referenced for longer than a grace period. A lost
//! list of registered repos then costs nothing at once: what the lost repos
//! referenced stays for the grace period, time to register them again.
//!
//! Kept by a [`GcRecords`], gc's records' engine: [`SeenLog`] is one SQLite
//! table beside the pool (`gc.sqlite`), written in one
//! transaction per gc, so a kill at any point leaves the last gc's record
//! or the new one. An entry never seen referenced counts from the first gc
//! that listed it (no later than its storing: it is kept at least as long).
//! [`super::PgGcRecords`] (`pg_seen.rs`) is the table a lab's daemons
//! share (issue 31), held to the same contract (`registry/tests.rs`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};

use super::error::{PoolError, Result};
use super::Oid;

const CREATE: &str =
    "CREATE TABLE IF NOT EXISTS seen (key BLOB PRIMARY KEY NOT NULL, at INTEGER NOT NULL)";

/// When each pool entry was last seen referenced: what gc's grace period
/// is counted from.
///
/// Atomicity: [`GcRecords::last_referenced`] with `record` writes the
/// whole new record in one transaction, so a kill leaves the last gc's
/// record or this one, never a mix.
pub trait GcRecords: Send {
    /// For each of the `listed` keys, the last time (Unix seconds) it was
    /// seen referenced: `now` for those in `live`, else the recorded time,
    /// else `now` (first seen). With `record`, that is written, and records
    /// of keys no longer listed (gone from the pool) are dropped.
    fn last_referenced(
        &mut self,
        listed: &HashSet<Vec<u8>>,
        live: &HashSet<Oid>,
        now: u64,
        record: bool,
    ) -> Result<HashMap<Vec<u8>, u64>>;
}

/// For each of the `listed` keys, when it was last seen referenced: `now`
/// for those in `live`, else its `recorded` time, else `now` (first seen).
/// What every [`GcRecords`] engine answers from what it has recorded.
pub(crate) fn sightings(
    listed: &HashSet<Vec<u8>>,
    live: &HashSet<Oid>,
    recorded: &HashMap<Vec<u8>, u64>,
    now: u64,
) -> HashMap<Vec<u8>, u64> {
    let mut last = HashMap::with_capacity(listed.len());
    for key in listed {
        let referenced = Oid::from_key(key).is_some_and(|o| live.contains(&o));
        let at = match recorded.get(key) {
            Some(&at) if !referenced => at,
            _ => now,
        };
        last.insert(key.clone(), at);
    }
    last
}

/// The record of when each pool entry was last seen referenced, in SQLite.
pub struct SeenLog {
    path: PathBuf,
    conn: Connection,
}

impl SeenLog {
    pub fn open(path: &Path) -> Result<SeenLog> {
        let err = |source| PoolError::Sqlite {
            op: "open",
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(err)?;
        conn.execute(CREATE, []).map_err(err)?;
        Ok(SeenLog {
            path: path.to_path_buf(),
            conn,
        })
    }

    /// See [`GcRecords::last_referenced`]; callable without the trait in
    /// scope, as gc calls it.
    pub fn last_referenced(
        &mut self,
        listed: &HashSet<Vec<u8>>,
        live: &HashSet<Oid>,
        now: u64,
        record: bool,
    ) -> Result<HashMap<Vec<u8>, u64>> {
        let path = self.path.clone();
        let err = |source| PoolError::Sqlite {
            op: "record gc sightings",
            path: path.clone(),
            source,
        };
        let recorded = self.recorded().map_err(err)?;
        let last = sightings(listed, live, &recorded, now);
        if record {
            self.write(&recorded, &last).map_err(err)?;
        }
        Ok(last)
    }

    fn recorded(&self) -> rusqlite::Result<HashMap<Vec<u8>, u64>> {
        let mut stmt = self.conn.prepare("SELECT key, at FROM seen")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?;
        rows.collect()
    }

    fn write(
        &mut self,
        recorded: &HashMap<Vec<u8>, u64>,
        last: &HashMap<Vec<u8>, u64>,
    ) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut upsert = tx.prepare(
                "INSERT INTO seen (key, at) VALUES (?1, ?2) \
                 ON CONFLICT (key) DO UPDATE SET at = excluded.at",
            )?;
            for (key, at) in last {
                if recorded.get(key) != Some(at) {
                    upsert.execute(params![key, *at as i64])?;
                }
            }
            let mut forget = tx.prepare("DELETE FROM seen WHERE key = ?1")?;
            for key in recorded.keys().filter(|k| !last.contains_key(*k)) {
                forget.execute([key])?;
            }
        }
        tx.commit()
    }
}

impl GcRecords for SeenLog {
    fn last_referenced(
        &mut self,
        listed: &HashSet<Vec<u8>>,
        live: &HashSet<Oid>,
        now: u64,
        record: bool,
    ) -> Result<HashMap<Vec<u8>, u64>> {
        SeenLog::last_referenced(self, listed, live, now, record)
    }
}
