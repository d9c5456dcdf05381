//! gc's grace records for a lab's shared pool, in one PostgreSQL table
//! (`drsd_gc_seen`), so a gc on any machine counts an entry's grace from
//! the last time any gc saw it referenced. Owns that table; connections are
//! [`super::pg`]'s. Same contract as [`super::SeenLog`] (`GcRecords`).
//!
//! Two gcs on two machines may run at once, each reading the records, then
//! writing what it saw. Neither may shorten the other's grace, so a write
//! only ever moves a sighting later (`GREATEST`), and a record is dropped
//! (its key gone from the pool) only if it still holds what this gc read:
//! one the other gc wrote in between stays.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::error::Result;
use super::seen::{sightings, GcRecords};
use super::Oid;
use crate::pg::schema::GC_SEEN as DDL;
use crate::pg::{create_tables, PgServer};

/// Rows sent per statement when the record is written: one statement per
/// chunk, all in one transaction.
const CHUNK: usize = 20_000;

const UPSERT: &str = "INSERT INTO drsd_gc_seen (key, at) \
    SELECT * FROM unnest($1::bytea[], $2::bigint[]) \
    ON CONFLICT (key) DO UPDATE SET at = GREATEST(drsd_gc_seen.at, excluded.at)";
const FORGET: &str = "DELETE FROM drsd_gc_seen AS s \
    USING unnest($1::bytea[], $2::bigint[]) AS g(key, at) \
    WHERE s.key = g.key AND s.at = g.at";

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
        let gone: Vec<(&[u8], i64)> = recorded
            .iter()
            .filter(|(k, _)| !last.contains_key(*k))
            .map(|(k, at)| (k.as_slice(), *at as i64))
            .collect();
        self.server.with("record gc sightings", |c| {
            let mut tx = c.client.transaction()?;
            for chunk in changed.chunks(CHUNK) {
                let (keys, ats) = columns(chunk);
                tx.execute(UPSERT, &[&keys, &ats])?;
            }
            for chunk in gone.chunks(CHUNK) {
                let (keys, ats) = columns(chunk);
                tx.execute(FORGET, &[&keys, &ats])?;
            }
            tx.commit()
        })
    }
}

/// Keys and times as the two arrays a statement takes.
fn columns<'a>(rows: &[(&'a [u8], i64)]) -> (Vec<&'a [u8]>, Vec<i64>) {
    rows.iter().copied().unzip()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::TestDb;

    fn key(name: &str) -> Vec<u8> {
        Oid::of(name.as_bytes()).as_bytes().to_vec()
    }

    #[test]
    fn two_gcs_at_once_neither_move_a_sighting_back_nor_drop_one_the_other_wrote() {
        let db = TestDb::create();
        let a = PgGcRecords::new(PgServer::open(&db.url).unwrap()).unwrap();
        let b = PgGcRecords::new(PgServer::open(&db.url).unwrap()).unwrap();
        let (kept, gone) = (key("kept"), key("gone"));
        let first: HashMap<Vec<u8>, u64> = [(kept.clone(), 100), (gone.clone(), 100)].into();
        a.write(&HashMap::new(), &first).unwrap();

        // Both read the same records; b then sees `kept` referenced at 900
        // and `gone` back in the pool, and writes first.
        let read_by_a = a.recorded().unwrap();
        let read_by_b = b.recorded().unwrap();
        let by_b: HashMap<Vec<u8>, u64> = [(kept.clone(), 900), (gone.clone(), 900)].into();
        b.write(&read_by_b, &by_b).unwrap();
        // a, from its older reading, saw `kept` at 500 and `gone` gone.
        let by_a: HashMap<Vec<u8>, u64> = [(kept.clone(), 500)].into();
        a.write(&read_by_a, &by_a).unwrap();

        let now = a.recorded().unwrap();
        assert_eq!(
            now.get(&kept),
            Some(&900),
            "a moved b's later sighting back"
        );
        assert_eq!(
            now.get(&gone),
            Some(&900),
            "a dropped the record b wrote after a read it"
        );
        // With nothing written in between, a key gone from the pool is dropped.
        let read = a.recorded().unwrap();
        a.write(&read, &[(kept.clone(), 900)].into()).unwrap();
        assert!(!a.recorded().unwrap().contains_key(&gone));
    }
}
