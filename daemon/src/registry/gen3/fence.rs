//! Uploads to a Gen3 commons through Fence, step by step. Each step is
//! recorded here before it is taken (as S3 multipart uploads are, in
//! `uploads.rs`), so a push killed anywhere (kill -9) leaves the registry
//! knowing which record it began: the next push finds that record (at most
//! a blank one, since a record is completed only once its bytes are in)
//! and finishes it, or begins again.
//!
//! Steps, in order: `begun` (a blank record is about to be asked for, under
//! the content's own did where the commons takes it), `blank` (the record
//! exists, blank: its did is known), `uploading` (a multipart upload of it
//! begun: its id), `uploaded` (the bytes are in, the record to complete),
//! `done` (completed with size, hashes and location).
//!
//! While `uploading`, each part the store took is recorded with the ETag it
//! answered (`fence_upload_parts`), so a push resumed after a kill sends
//! only the parts missing, into the same upload, and leaves no orphaned
//! parts behind (Fence has no call to abort an upload). A new upload id,
//! or a step past `uploading`, drops the parts of the old one.

//!
//! Here: the step types, and SQLite's [`FenceUploads`] ([`SqliteRegistry`])
//! and its table.

use rusqlite::{params, OptionalExtension};

use crate::pool::Oid;
use crate::registry::oid_text::oid_column;
use crate::registry::sqlite::{sql, SqliteRegistry};
use crate::registry::{now, RegistryError};
pub use crate::stores::drs::FencePart;

pub(in crate::registry) const SCHEMA: &str = "
    CREATE TABLE fence_uploads (
        commons TEXT NOT NULL,
        oid TEXT NOT NULL,
        did TEXT,
        step TEXT NOT NULL,
        upload_id TEXT,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (commons, oid)
    );
";

pub(in crate::registry) const PARTS_SCHEMA: &str = "
    CREATE TABLE fence_upload_parts (
        commons TEXT NOT NULL,
        oid TEXT NOT NULL,
        upload_id TEXT NOT NULL,
        key TEXT NOT NULL,
        number INTEGER NOT NULL,
        etag TEXT NOT NULL,
        PRIMARY KEY (commons, oid, upload_id, number)
    );
";

/// How far an upload through Fence got (see the module notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FenceStep {
    Begun,
    Blank,
    Uploading,
    Uploaded,
    Done,
}

impl std::fmt::Display for FenceStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FenceStep {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            FenceStep::Begun => "begun",
            FenceStep::Blank => "blank",
            FenceStep::Uploading => "uploading",
            FenceStep::Uploaded => "uploaded",
            FenceStep::Done => "done",
        }
    }

    pub(super) fn parse(text: &str) -> Option<FenceStep> {
        Some(match text {
            "begun" => FenceStep::Begun,
            "blank" => FenceStep::Blank,
            "uploading" => FenceStep::Uploading,
            "uploaded" => FenceStep::Uploaded,
            "done" => FenceStep::Done,
            _ => return None,
        })
    }
}

/// What the registry knows of one object's upload to one commons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceUpload {
    pub oid: Oid,
    /// The record's did, once known.
    pub did: Option<String>,
    pub step: FenceStep,
    /// The multipart upload's id, while one is open.
    pub upload_id: Option<String>,
}

/// Uploads to a Gen3 commons through Fence, each step recorded before it
/// is taken (the module's notes), per commons (its `gen3+https://host`)
/// and object.
pub trait FenceUploads {
    /// Records that `oid`'s upload to `commons` is at `step`, with its
    /// record's did and multipart upload id when known (a did once known
    /// is kept when `did` is `None`; the upload id is replaced).
    fn fence_step(
        &self,
        commons: &str,
        oid: Oid,
        step: FenceStep,
        did: Option<&str>,
        upload_id: Option<&str>,
    ) -> Result<(), RegistryError>;

    /// Forgets what was recorded of `oid`'s upload to `commons` (its blank
    /// record turned out to be gone: the next try begins again).
    fn fence_forget(&self, commons: &str, oid: Oid) -> Result<(), RegistryError>;

    /// What is recorded of `oid`'s upload to `commons`.
    fn fence_upload(&self, commons: &str, oid: Oid) -> Result<Option<FenceUpload>, RegistryError>;

    /// Records that the store took `part` of `oid`'s multipart upload to
    /// `commons` (kept while the upload is at `uploading` with that id).
    fn fence_part_sent(
        &self,
        commons: &str,
        oid: Oid,
        part: &FencePart,
    ) -> Result<(), RegistryError>;

    /// The parts recorded of `oid`'s upload `upload_id` to `commons`, by
    /// number.
    fn fence_parts(
        &self,
        commons: &str,
        oid: Oid,
        upload_id: &str,
    ) -> Result<Vec<FencePart>, RegistryError>;

    /// Uploads to any commons not done, oldest first, with their commons:
    /// `drsctl status`.
    fn fence_unfinished(&self) -> Result<Vec<(String, FenceUpload)>, RegistryError>;
}

impl FenceUploads for SqliteRegistry {
    fn fence_step(
        &self,
        commons: &str,
        oid: Oid,
        step: FenceStep,
        did: Option<&str>,
        upload_id: Option<&str>,
    ) -> Result<(), RegistryError> {
        self.write("record a step of a Fence upload", |tx| {
            tx.execute(
                "INSERT INTO fence_uploads (commons, oid, did, step, upload_id, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (commons, oid) DO UPDATE SET
                    did = COALESCE(excluded.did, fence_uploads.did),
                    step = excluded.step, upload_id = excluded.upload_id,
                    updated_at = excluded.updated_at",
                params![
                    commons,
                    oid.to_hex(),
                    did,
                    step.as_str(),
                    upload_id,
                    now() as i64
                ],
            )?;
            let upload_id = upload_id.filter(|_| step < FenceStep::Uploaded);
            tx.execute(
                "DELETE FROM fence_upload_parts
                 WHERE commons = ?1 AND oid = ?2 AND upload_id IS NOT ?3",
                params![commons, oid.to_hex(), upload_id],
            )
        })?;
        Ok(())
    }

    fn fence_part_sent(
        &self,
        commons: &str,
        oid: Oid,
        part: &FencePart,
    ) -> Result<(), RegistryError> {
        self.write("record a part of a Fence upload", |tx| {
            tx.execute(
                "INSERT INTO fence_upload_parts (commons, oid, upload_id, key, number, etag)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (commons, oid, upload_id, number) DO UPDATE SET
                    key = excluded.key, etag = excluded.etag",
                params![
                    commons,
                    oid.to_hex(),
                    part.upload_id,
                    part.key,
                    part.number,
                    part.etag
                ],
            )
        })?;
        Ok(())
    }

    fn fence_parts(
        &self,
        commons: &str,
        oid: Oid,
        upload_id: &str,
    ) -> Result<Vec<FencePart>, RegistryError> {
        let conn = self.lock();
        let err = sql(self.path(), "read the parts of a Fence upload");
        let mut stmt = conn
            .prepare(
                "SELECT upload_id, key, number, etag FROM fence_upload_parts
                 WHERE commons = ?1 AND oid = ?2 AND upload_id = ?3 ORDER BY number",
            )
            .map_err(&err)?;
        let rows = stmt
            .query_map(params![commons, oid.to_hex(), upload_id], |r| {
                Ok(FencePart {
                    upload_id: r.get(0)?,
                    key: r.get(1)?,
                    number: r.get(2)?,
                    etag: r.get(3)?,
                })
            })
            .map_err(&err)?;
        rows.collect::<Result<_, _>>().map_err(&err)
    }

    fn fence_forget(&self, commons: &str, oid: Oid) -> Result<(), RegistryError> {
        self.write("forget a Fence upload", |tx| {
            tx.execute(
                "DELETE FROM fence_upload_parts WHERE commons = ?1 AND oid = ?2",
                params![commons, oid.to_hex()],
            )?;
            tx.execute(
                "DELETE FROM fence_uploads WHERE commons = ?1 AND oid = ?2",
                params![commons, oid.to_hex()],
            )
        })?;
        Ok(())
    }

    fn fence_upload(&self, commons: &str, oid: Oid) -> Result<Option<FenceUpload>, RegistryError> {
        let conn = self.lock();
        conn.query_row(
            "SELECT oid, did, step, upload_id FROM fence_uploads WHERE commons = ?1 AND oid = ?2",
            params![commons, oid.to_hex()],
            row,
        )
        .optional()
        .map_err(sql(self.path(), "read a Fence upload"))
    }

    fn fence_unfinished(&self) -> Result<Vec<(String, FenceUpload)>, RegistryError> {
        let conn = self.lock();
        let err = sql(self.path(), "list unfinished Fence uploads");
        let mut stmt = conn
            .prepare(
                "SELECT oid, did, step, upload_id, commons FROM fence_uploads
                 WHERE step != 'done' ORDER BY updated_at",
            )
            .map_err(&err)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(4)?, row(r)?)))
            .map_err(&err)?;
        rows.collect::<Result<_, _>>().map_err(&err)
    }
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FenceUpload> {
    let step: String = r.get(2)?;
    let step = FenceStep::parse(&step).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            2,
            rusqlite::types::Type::Text,
            format!("unknown Fence upload step {step:?}").into(),
        )
    })?;
    Ok(FenceUpload {
        oid: oid_column(r, 0)?,
        did: r.get(1)?,
        step,
        upload_id: r.get(3)?,
    })
}
