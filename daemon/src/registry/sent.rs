//! Objects shown to be in an S3 object remote: sent by this daemon, or
//! found there and proven (DESIGN.md "Trust"), each with the ETag the
//! store gave those bytes. A later push that finds the same ETag at the
//! key knows the bytes without reading them; any other ETag (a lab member
//! wrote the key since) is proven again from scratch.
//!
//! Here: SQLite's [`SentRecords`] ([`SqliteRegistry`]) and its table.

use rusqlite::{params, OptionalExtension};

use super::engine::SentRecords;
use super::oid_text::oid_column;
use super::sqlite::{sql, SqliteRegistry};
use super::{now, RegistryError};
use crate::stores::SentObject;

pub(super) const SCHEMA: &str = "
    CREATE TABLE sent (
        endpoint TEXT NOT NULL,
        bucket TEXT NOT NULL,
        key TEXT NOT NULL,
        oid TEXT NOT NULL,
        size INTEGER NOT NULL,
        etag TEXT NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (endpoint, bucket, key)
    );
";

impl SentRecords for SqliteRegistry {
    /// Records `object` as at its key, replacing what was known of the key.
    fn record_sent(&self, object: &SentObject) -> Result<(), RegistryError> {
        self.write("record a sent object", |tx| {
            tx.execute(
                "INSERT OR REPLACE INTO sent (endpoint, bucket, key, oid, size, etag, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    object.endpoint,
                    object.bucket,
                    object.key,
                    object.oid.to_hex(),
                    object.size,
                    object.etag,
                    now() as i64
                ],
            )
        })?;
        Ok(())
    }

    /// What was last shown to be at `key`.
    fn sent_object(
        &self,
        endpoint: &str,
        bucket: &str,
        key: &str,
    ) -> Result<Option<SentObject>, RegistryError> {
        self.lock()
            .query_row(
                "SELECT oid, size, etag FROM sent WHERE endpoint = ?1 AND bucket = ?2 AND key = ?3",
                params![endpoint, bucket, key],
                |r| {
                    Ok(SentObject {
                        endpoint: endpoint.into(),
                        bucket: bucket.into(),
                        key: key.into(),
                        oid: oid_column(r, 0)?,
                        size: r.get(1)?,
                        etag: r.get(2)?,
                    })
                },
            )
            .optional()
            .map_err(sql(self.path(), "look up a sent object"))
    }
}
