//! Objects shown to be in an S3 object remote: sent by this daemon, or
//! found there and proven (DESIGN.md "Trust"), each with the ETag the
//! store gave those bytes. A later push that finds the same ETag at the
//! key knows the bytes without reading them; any other ETag (a lab member
//! wrote the key since) is proven again from scratch.

use rusqlite::{params, OptionalExtension};

use super::oid_text::oid_column;
use super::store::sql;
use super::{now, Registry, RegistryError};
use crate::stores::{SentObject, UploadJournal};

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

impl Registry {
    /// Records `object` as at its key, replacing what was known of the key.
    pub fn record_sent(&self, object: &SentObject) -> Result<(), RegistryError> {
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
    pub fn sent_object(
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

impl UploadJournal for Registry {
    fn started(
        &self,
        upload: &crate::stores::MultipartUpload,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.upload_started(upload)?)
    }

    fn ended(&self, upload: &crate::stores::MultipartUpload) {
        if let Err(e) = self.upload_ended(upload) {
            // Harmless: the next start aborts it again, and an upload that
            // is gone counts as aborted.
            log::warn!("forgetting upload {}: {e}", upload.upload_id);
        }
    }

    fn sent(&self, object: &SentObject) {
        if let Err(e) = self.record_sent(object) {
            log::warn!(
                "recording s3://{}/{} as sent: {e}",
                object.bucket,
                object.key
            );
        }
    }

    fn sent_at(&self, endpoint: &str, bucket: &str, key: &str) -> Option<SentObject> {
        self.sent_object(endpoint, bucket, key)
            .inspect_err(|e| log::warn!("looking up s3://{bucket}/{key}: {e}"))
            .ok()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::Oid;

    #[test]
    fn a_sent_object_is_found_by_its_key_and_a_later_record_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::open(&dir.path().join("registry.sqlite")).unwrap();
        let sent = |oid: Oid, etag: &str| SentObject {
            endpoint: "http://127.0.0.1:8000/".into(),
            bucket: "b".into(),
            key: "lfs/ab/cd/x".into(),
            oid,
            size: 5,
            etag: etag.into(),
        };
        assert_eq!(
            registry
                .sent_object("http://127.0.0.1:8000/", "b", "lfs/ab/cd/x")
                .unwrap(),
            None
        );
        registry.record_sent(&sent(Oid::of(b"one"), "e1")).unwrap();
        registry.record_sent(&sent(Oid::of(b"two"), "e2")).unwrap();
        let got = registry
            .sent_object("http://127.0.0.1:8000/", "b", "lfs/ab/cd/x")
            .unwrap();
        assert_eq!(got, Some(sent(Oid::of(b"two"), "e2")));
        assert_eq!(
            registry
                .sent_object("http://other/", "b", "lfs/ab/cd/x")
                .unwrap(),
            None
        );
    }
}
