//! When a gc last saw each pool entry referenced, so a gc removes only
//! entries no repo has referenced for longer than a grace period. A lost
//! list of registered repos then costs nothing at once: what the lost repos
//! referenced stays for the grace period, time to register them again.
//!
//! One SQLite table beside the pool (`gc.sqlite`), written in one
//! transaction per gc, so a kill at any point leaves the last gc's record
//! or the new one. An entry never seen referenced counts from the first gc
//! that listed it (no later than its storing: it is kept at least as long).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};

use super::error::{PoolError, Result};
use super::Oid;

const CREATE: &str =
    "CREATE TABLE IF NOT EXISTS seen (key BLOB PRIMARY KEY NOT NULL, at INTEGER NOT NULL)";

/// The record of when each pool entry was last seen referenced.
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

    /// For each of the `listed` keys, the last time (Unix seconds) it was
    /// seen referenced: `now` for those in `live`, else the recorded time,
    /// else `now` (first seen). With `record`, that is written, and records
    /// of keys no longer listed (gone from the pool) are dropped.
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
        let mut last = HashMap::with_capacity(listed.len());
        for key in listed {
            let referenced = Oid::from_key(key).is_some_and(|o| live.contains(&o));
            let at = match recorded.get(key) {
                Some(&at) if !referenced => at,
                _ => now,
            };
            last.insert(key.clone(), at);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_counts_from_its_last_reference_or_its_first_sighting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gc.sqlite");
        let (a, b) = (Oid::of(b"a"), Oid::of(b"b"));
        let key = |o: &Oid| o.as_bytes().to_vec();
        let listed: HashSet<Vec<u8>> = [key(&a), key(&b)].into();
        let mut log = SeenLog::open(&path).unwrap();
        // First gc: a referenced, b first seen; both at 100.
        let last = log
            .last_referenced(&listed, &[a].into(), 100, true)
            .unwrap();
        assert_eq!((last[&key(&a)], last[&key(&b)]), (100, 100));
        // A dry run at 150 with a referenced: computed, not written.
        let last = log
            .last_referenced(&listed, &[a].into(), 150, false)
            .unwrap();
        assert_eq!((last[&key(&a)], last[&key(&b)]), (150, 100));
        // Reopened (a restarted daemon): neither referenced at 200.
        let mut log = SeenLog::open(&path).unwrap();
        let last = log
            .last_referenced(&listed, &HashSet::new(), 200, true)
            .unwrap();
        assert_eq!((last[&key(&a)], last[&key(&b)]), (100, 100));
        // b left the pool: its record goes; a new sighting of it starts over.
        let only_a: HashSet<Vec<u8>> = [key(&a)].into();
        log.last_referenced(&only_a, &HashSet::new(), 300, true)
            .unwrap();
        let last = log
            .last_referenced(&listed, &HashSet::new(), 400, true)
            .unwrap();
        assert_eq!((last[&key(&a)], last[&key(&b)]), (100, 400));
    }
}
