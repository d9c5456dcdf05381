//! Multipart uploads in flight. An upload's parts stay in the bucket, out
//! of sight and billed, until it is completed or aborted; a daemon killed
//! (kill -9, a drain that timed out) in the middle does neither. So the
//! upload id is recorded here before the first part is sent and removed
//! once the upload is completed or aborted; at the next start the daemon
//! aborts every upload still recorded (see `server::uploads`).
//!
//! Not covered: a kill between the store creating the upload and this
//! record being committed (one round trip): the store never told us the id.
//!
//! Here: SQLite's [`OpenUploads`] ([`SqliteRegistry`]) and its table.

use rusqlite::params;

use super::engine::OpenUploads;
use super::sqlite::{sql, SqliteRegistry};
use super::{now, RegistryError};
use crate::stores::MultipartUpload;

pub(super) const SCHEMA: &str = "
    CREATE TABLE uploads (
        endpoint TEXT NOT NULL,
        bucket TEXT NOT NULL,
        key TEXT NOT NULL,
        upload_id TEXT NOT NULL,
        started INTEGER NOT NULL,
        PRIMARY KEY (endpoint, bucket, upload_id)
    );
";

impl OpenUploads for SqliteRegistry {
    /// Records `upload` as begun (before its first part).
    fn upload_started(&self, upload: &MultipartUpload) -> Result<(), RegistryError> {
        self.write("record an upload", |tx| {
            tx.execute(
                "INSERT OR REPLACE INTO uploads (endpoint, bucket, key, upload_id, started)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    upload.endpoint,
                    upload.bucket,
                    upload.key,
                    upload.upload_id,
                    now() as i64
                ],
            )
        })?;
        Ok(())
    }

    /// `upload` is completed or aborted: nothing of it is left in the bucket.
    fn upload_ended(&self, upload: &MultipartUpload) -> Result<(), RegistryError> {
        self.write("forget an upload", |tx| {
            tx.execute(
                "DELETE FROM uploads WHERE endpoint = ?1 AND bucket = ?2 AND upload_id = ?3",
                params![upload.endpoint, upload.bucket, upload.upload_id],
            )
        })?;
        Ok(())
    }

    /// The uploads recorded as begun and not ended, oldest first.
    fn open_uploads(&self) -> Result<Vec<MultipartUpload>, RegistryError> {
        let conn = self.lock();
        let err = sql(self.path(), "list uploads");
        let mut stmt = conn
            .prepare("SELECT endpoint, bucket, key, upload_id FROM uploads ORDER BY started")
            .map_err(&err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(MultipartUpload {
                    endpoint: r.get(0)?,
                    bucket: r.get(1)?,
                    key: r.get(2)?,
                    upload_id: r.get(3)?,
                })
            })
            .map_err(&err)?;
        rows.collect::<Result<_, _>>().map_err(&err)
    }
}
