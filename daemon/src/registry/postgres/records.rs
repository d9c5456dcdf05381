//! [`PgRegistry`]'s smaller rooms: multipart uploads in flight (this
//! node's: only the node that began one aborts it), objects shown to be in
//! an S3 object remote and registrations with an Indexd (the lab's).

use super::rows::{big, OidText};
use super::PgRegistry;
use crate::pool::Oid;
use crate::registry::engine::{IndexdRecords, OpenUploads, SentRecords};
use crate::registry::{now, IndexdRegistration, RegistryError};
use crate::stores::{MultipartUpload, SentObject};

impl OpenUploads for PgRegistry {
    fn upload_started(&self, upload: &MultipartUpload) -> Result<(), RegistryError> {
        self.tx("record an upload", |tx| {
            tx.execute(
                "INSERT INTO drsd_reg_uploads (node, endpoint, bucket, key, upload_id, started)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (node, endpoint, bucket, upload_id) DO UPDATE
                    SET key = excluded.key, started = excluded.started",
                &[
                    &self.node.name,
                    &upload.endpoint,
                    &upload.bucket,
                    &upload.key,
                    &upload.upload_id,
                    &big(now()),
                ],
            )?;
            Ok(())
        })
    }

    fn upload_ended(&self, upload: &MultipartUpload) -> Result<(), RegistryError> {
        self.tx("forget an upload", |tx| {
            tx.execute(
                "DELETE FROM drsd_reg_uploads
                 WHERE node = $1 AND endpoint = $2 AND bucket = $3 AND upload_id = $4",
                &[
                    &self.node.name,
                    &upload.endpoint,
                    &upload.bucket,
                    &upload.upload_id,
                ],
            )?;
            Ok(())
        })
    }

    fn open_uploads(&self) -> Result<Vec<MultipartUpload>, RegistryError> {
        self.tx("list uploads", |tx| {
            let rows = tx.query(
                "SELECT endpoint, bucket, key, upload_id FROM drsd_reg_uploads
                 WHERE node = $1 ORDER BY started, upload_id",
                &[&self.node.name],
            )?;
            rows.iter()
                .map(|r| {
                    Ok(MultipartUpload {
                        endpoint: r.try_get(0)?,
                        bucket: r.try_get(1)?,
                        key: r.try_get(2)?,
                        upload_id: r.try_get(3)?,
                    })
                })
                .collect()
        })
    }
}

impl SentRecords for PgRegistry {
    fn record_sent(&self, object: &SentObject) -> Result<(), RegistryError> {
        self.tx("record a sent object", |tx| {
            tx.execute(
                "INSERT INTO drsd_reg_sent (endpoint, bucket, key, oid, size, etag, at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (endpoint, bucket, key) DO UPDATE SET oid = excluded.oid,
                    size = excluded.size, etag = excluded.etag, at = excluded.at",
                &[
                    &object.endpoint,
                    &object.bucket,
                    &object.key,
                    &object.oid.to_hex(),
                    &big(object.size),
                    &object.etag,
                    &big(now()),
                ],
            )?;
            Ok(())
        })
    }

    fn sent_object(
        &self,
        endpoint: &str,
        bucket: &str,
        key: &str,
    ) -> Result<Option<SentObject>, RegistryError> {
        self.tx("look up a sent object", |tx| {
            let row = tx.query_opt(
                "SELECT oid, size, etag FROM drsd_reg_sent
                 WHERE endpoint = $1 AND bucket = $2 AND key = $3",
                &[&endpoint, &bucket, &key],
            )?;
            row.map(|r| {
                Ok(SentObject {
                    endpoint: endpoint.into(),
                    bucket: bucket.into(),
                    key: key.into(),
                    oid: r.try_get::<_, OidText>(0)?.0,
                    size: r.try_get::<_, i64>(1)? as u64,
                    etag: r.try_get(2)?,
                })
            })
            .transpose()
        })
    }
}

impl IndexdRecords for PgRegistry {
    fn indexd_begin(&self, indexd: &str, oid: Oid) -> Result<(), RegistryError> {
        self.tx("begin an Indexd registration", |tx| {
            tx.execute(
                "INSERT INTO drsd_reg_indexd (indexd, oid, did, updated_at)
                 VALUES ($1, $2, NULL, $3) ON CONFLICT (indexd, oid) DO NOTHING",
                &[&indexd, &oid.to_hex(), &big(now())],
            )?;
            Ok(())
        })
    }

    fn indexd_registered(&self, indexd: &str, oid: Oid, did: &str) -> Result<(), RegistryError> {
        self.tx("record an Indexd registration", |tx| {
            tx.execute(
                "INSERT INTO drsd_reg_indexd (indexd, oid, did, updated_at)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (indexd, oid) DO UPDATE SET did = excluded.did,
                    updated_at = excluded.updated_at",
                &[&indexd, &oid.to_hex(), &did, &big(now())],
            )?;
            tx.execute(
                "UPDATE drsd_reg_objects SET drs_id = $1, updated_at = $2
                 WHERE content_oid = $3 AND drs_id IS NULL",
                &[&did, &big(now()), &oid.to_hex()],
            )?;
            Ok(())
        })
    }

    fn indexd_registration(
        &self,
        indexd: &str,
        oid: Oid,
    ) -> Result<Option<IndexdRegistration>, RegistryError> {
        self.tx("read an Indexd registration", |tx| {
            let row = tx.query_opt(
                "SELECT oid, did FROM drsd_reg_indexd WHERE indexd = $1 AND oid = $2",
                &[&indexd, &oid.to_hex()],
            )?;
            row.map(|r| {
                Ok(IndexdRegistration {
                    oid: r.try_get::<_, OidText>(0)?.0,
                    did: r.try_get(1)?,
                })
            })
            .transpose()
        })
    }

    fn indexd_unfinished(&self, indexd: &str) -> Result<Vec<Oid>, RegistryError> {
        self.tx("list unfinished Indexd registrations", |tx| {
            let rows = tx.query(
                "SELECT oid FROM drsd_reg_indexd WHERE indexd = $1 AND did IS NULL ORDER BY oid",
                &[&indexd],
            )?;
            rows.iter()
                .map(|r| Ok(r.try_get::<_, OidText>(0)?.0))
                .collect()
        })
    }
}
