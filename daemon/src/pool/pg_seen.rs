//! gc's grace records for a lab's shared pool, in one PostgreSQL table
//! (`drsd_gc_seen`), so a gc on any machine counts an entry's grace from
//! the last time any gc saw it referenced. Owns that table; connections are
//! [`super::pg`]'s. Same contract as [`super::SeenLog`] (`GcRecords`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::error::Result;
use super::pg::{create_tables, PgServer};
use super::seen::{sightings, GcRecords};
use super::Oid;

const DDL: &str = "CREATE TABLE IF NOT EXISTS drsd_gc_seen \
    (key bytea PRIMARY KEY, at bigint NOT NULL);";

/// Rows sent per statement when the record is written: one statement per
/// chunk, all in one transaction.
const CHUNK: usize = 20_000;

const UPSERT: &str = "INSERT INTO drsd_gc_seen (key, at) \
    SELECT * FROM unnest($1::bytea[], $2::bigint[]) \
    ON CONFLICT (key) DO UPDATE SET at = excluded.at";
const FORGET: &str = "DELETE FROM drsd_gc_seen WHERE key = ANY($1::bytea[])";

/// When each entry of the shared pool was last seen referenced, in the
/// team database.
pub struct PgGcRecords {
    server: Arc<PgServer>,
}

impl PgGcRecords {
    /// The records on `server`; the table is made when missing.
    pub fn new(server: Arc<PgServer>) -> Result<PgGcRecords> {
        server.with("create the gc records table", |c| create_tables(c, DDL))?;
        Ok(PgGcRecords { server })
    }

    fn recorded(&self) -> Result<HashMap<Vec<u8>, u64>> {
        self.server.with("read gc records", |c| {
            let rows = c.client.query("SELECT key, at FROM drsd_gc_seen", &[])?;
            Ok(rows
                .iter()
                .map(|r| (r.get::<_, Vec<u8>>(0), r.get::<_, i64>(1) as u64))
                .collect())
        })
    }

    /// Writes what changed and drops the records of keys gone from the
    /// pool, in one transaction.
    fn write(&self, recorded: &HashMap<Vec<u8>, u64>, last: &HashMap<Vec<u8>, u64>) -> Result<()> {
        let changed: Vec<(&[u8], i64)> = last
            .iter()
            .filter(|(key, at)| recorded.get(*key) != Some(at))
            .map(|(key, at)| (key.as_slice(), *at as i64))
            .collect();
        let gone: Vec<&[u8]> = recorded
            .keys()
            .filter(|k| !last.contains_key(*k))
            .map(Vec::as_slice)
            .collect();
        self.server.with("record gc sightings", |c| {
            let mut tx = c.client.transaction()?;
            for chunk in changed.chunks(CHUNK) {
                let keys: Vec<&[u8]> = chunk.iter().map(|(k, _)| *k).collect();
                let ats: Vec<i64> = chunk.iter().map(|(_, at)| *at).collect();
                tx.execute(UPSERT, &[&keys, &ats])?;
            }
            for chunk in gone.chunks(CHUNK) {
                tx.execute(FORGET, &[&chunk])?;
            }
            tx.commit()
        })
    }
}

impl GcRecords for PgGcRecords {
    fn last_referenced(
        &mut self,
        listed: &HashSet<Vec<u8>>,
        live: &HashSet<Oid>,
        now: u64,
        record: bool,
    ) -> Result<HashMap<Vec<u8>, u64>> {
        let recorded = self.recorded()?;
        let last = sightings(listed, live, &recorded, now);
        if record {
            self.write(&recorded, &last)?;
        }
        Ok(last)
    }
}
