//! Objects registered with a Gen3 Indexd at push time. A registration is
//! recorded here as begun before its `POST /index/` is sent, and its DRS id
//! (`did`) once Indexd answered: a push killed in between leaves a row
//! without a did, and the next push finds the record Indexd made (by its
//! sha256) instead of making a second one. Foreign objects of the same
//! content also get the did as their `drs_id`, so it reaches each repo's
//! mirror and survives the loss of the daemon's state.
//!
//! Here: the record's type, every engine's, and SQLite's [`IndexdRecords`]
//! ([`SqliteRegistry`]) with its table.

use rusqlite::{params, OptionalExtension};

use crate::pool::Oid;
use crate::registry::engine::IndexdRecords;
use crate::registry::oid_text::oid_column;
use crate::registry::sqlite::{sql, SqliteRegistry};
use crate::registry::{now, RegistryError};

pub(in crate::registry) const SCHEMA: &str = "
    CREATE TABLE indexd_records (
        indexd TEXT NOT NULL,
        oid TEXT NOT NULL,
        did TEXT,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (indexd, oid)
    );
";

/// What the registry knows of one object's record in one Indexd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexdRegistration {
    pub oid: Oid,
    /// `None`: a registration was begun and its answer never recorded.
    pub did: Option<String>,
}

impl IndexdRecords for SqliteRegistry {
    /// Records that `oid` is about to be registered with `indexd` (its base
    /// URL), keeping a did already known.
    fn indexd_begin(&self, indexd: &str, oid: Oid) -> Result<(), RegistryError> {
        self.write("begin an Indexd registration", |tx| {
            tx.execute(
                "INSERT INTO indexd_records (indexd, oid, did, updated_at) VALUES (?1, ?2, NULL, ?3)
                 ON CONFLICT (indexd, oid) DO NOTHING",
                params![indexd, oid.to_hex(), now() as i64],
            )
        })?;
        Ok(())
    }

    /// Records `did` as `oid`'s record in `indexd`, and as the DRS id of the
    /// foreign objects with that content that have none.
    fn indexd_registered(&self, indexd: &str, oid: Oid, did: &str) -> Result<(), RegistryError> {
        self.write("record an Indexd registration", |tx| {
            tx.execute(
                "INSERT INTO indexd_records (indexd, oid, did, updated_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (indexd, oid) DO UPDATE SET did = excluded.did,
                    updated_at = excluded.updated_at",
                params![indexd, oid.to_hex(), did, now() as i64],
            )?;
            tx.execute(
                "UPDATE objects SET drs_id = ?1, updated_at = ?2
                 WHERE content_oid = ?3 AND drs_id IS NULL",
                params![did, now() as i64, oid.to_hex()],
            )
        })?;
        Ok(())
    }

    /// What is recorded of `oid` in `indexd`.
    fn indexd_registration(
        &self,
        indexd: &str,
        oid: Oid,
    ) -> Result<Option<IndexdRegistration>, RegistryError> {
        let conn = self.lock();
        conn.query_row(
            "SELECT oid, did FROM indexd_records WHERE indexd = ?1 AND oid = ?2",
            params![indexd, oid.to_hex()],
            |r| {
                Ok(IndexdRegistration {
                    oid: oid_column(r, 0)?,
                    did: r.get(1)?,
                })
            },
        )
        .optional()
        .map_err(sql(self.path(), "read an Indexd registration"))
    }

    /// Registrations begun in `indexd` whose answer was never recorded.
    fn indexd_unfinished(&self, indexd: &str) -> Result<Vec<Oid>, RegistryError> {
        let conn = self.lock();
        let err = sql(self.path(), "list unfinished Indexd registrations");
        let mut stmt = conn
            .prepare("SELECT oid FROM indexd_records WHERE indexd = ?1 AND did IS NULL")
            .map_err(&err)?;
        let rows = stmt
            .query_map(params![indexd], |r| oid_column(r, 0))
            .map_err(&err)?;
        rows.collect::<Result<_, _>>().map_err(&err)
    }
}
