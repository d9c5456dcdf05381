//! [`PgRegistry`]'s uploads through a Gen3 commons' Fence, step by step
//! (`registry/fence_uploads.rs` says what each step means). Shared by the
//! team: the blank record one node began is the one another node's push
//! finishes.

use postgres::Row;

use super::rows::{big, OidText};
use super::PgRegistry;
use crate::pool::Oid;
use crate::registry::engine::FenceUploads;
use crate::registry::{now, FencePart, FenceStep, FenceUpload, RegistryError};

impl FenceUploads for PgRegistry {
    fn fence_step(
        &self,
        commons: &str,
        oid: Oid,
        step: FenceStep,
        did: Option<&str>,
        upload_id: Option<&str>,
    ) -> Result<(), RegistryError> {
        self.tx("record a step of a Fence upload", |tx| {
            tx.execute(
                "INSERT INTO drsd_reg_fence_uploads
                    (commons, oid, did, step, upload_id, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (commons, oid) DO UPDATE SET
                    did = COALESCE(excluded.did, drsd_reg_fence_uploads.did),
                    step = excluded.step, upload_id = excluded.upload_id,
                    updated_at = excluded.updated_at",
                &[
                    &commons,
                    &oid.to_hex(),
                    &did,
                    &step.as_str(),
                    &upload_id,
                    &big(now()),
                ],
            )?;
            let upload_id = upload_id.filter(|_| step < FenceStep::Uploaded);
            tx.execute(
                "DELETE FROM drsd_reg_fence_upload_parts
                 WHERE commons = $1 AND oid = $2 AND upload_id IS DISTINCT FROM $3",
                &[&commons, &oid.to_hex(), &upload_id],
            )?;
            Ok(())
        })
    }

    fn fence_part_sent(
        &self,
        commons: &str,
        oid: Oid,
        part: &FencePart,
    ) -> Result<(), RegistryError> {
        self.tx("record a part of a Fence upload", |tx| {
            tx.execute(
                "INSERT INTO drsd_reg_fence_upload_parts
                    (commons, oid, upload_id, key, number, etag)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (commons, oid, upload_id, number) DO UPDATE SET
                    key = excluded.key, etag = excluded.etag",
                &[
                    &commons,
                    &oid.to_hex(),
                    &part.upload_id,
                    &part.key,
                    &(part.number as i32),
                    &part.etag,
                ],
            )?;
            Ok(())
        })
    }

    fn fence_parts(
        &self,
        commons: &str,
        oid: Oid,
        upload_id: &str,
    ) -> Result<Vec<FencePart>, RegistryError> {
        self.tx("read the parts of a Fence upload", |tx| {
            let rows = tx.query(
                "SELECT upload_id, key, number, etag FROM drsd_reg_fence_upload_parts
                 WHERE commons = $1 AND oid = $2 AND upload_id = $3 ORDER BY number",
                &[&commons, &oid.to_hex(), &upload_id],
            )?;
            rows.iter()
                .map(|r| {
                    Ok(FencePart {
                        upload_id: r.try_get(0)?,
                        key: r.try_get(1)?,
                        number: r.try_get::<_, i32>(2)? as u32,
                        etag: r.try_get(3)?,
                    })
                })
                .collect()
        })
    }

    fn fence_forget(&self, commons: &str, oid: Oid) -> Result<(), RegistryError> {
        self.tx("forget a Fence upload", |tx| {
            tx.execute(
                "DELETE FROM drsd_reg_fence_upload_parts WHERE commons = $1 AND oid = $2",
                &[&commons, &oid.to_hex()],
            )?;
            tx.execute(
                "DELETE FROM drsd_reg_fence_uploads WHERE commons = $1 AND oid = $2",
                &[&commons, &oid.to_hex()],
            )?;
            Ok(())
        })
    }

    fn fence_upload(&self, commons: &str, oid: Oid) -> Result<Option<FenceUpload>, RegistryError> {
        self.tx("read a Fence upload", |tx| {
            let row = tx.query_opt(
                "SELECT oid, did, step, upload_id FROM drsd_reg_fence_uploads
                 WHERE commons = $1 AND oid = $2",
                &[&commons, &oid.to_hex()],
            )?;
            row.map(|r| upload_at(&r)).transpose()
        })
    }

    fn fence_unfinished(&self) -> Result<Vec<(String, FenceUpload)>, RegistryError> {
        self.tx("list unfinished Fence uploads", |tx| {
            let rows = tx.query(
                "SELECT oid, did, step, upload_id, commons FROM drsd_reg_fence_uploads
                 WHERE step <> 'done' ORDER BY updated_at, oid",
                &[],
            )?;
            rows.iter()
                .map(|r| Ok((r.try_get(4)?, upload_at(r)?)))
                .collect()
        })
    }
}

/// The upload whose columns (oid, did, step, upload_id) open `row`; an
/// unknown step is refused as a conversion error of its column.
fn upload_at(row: &Row) -> Result<FenceUpload, postgres::Error> {
    let step: StepText = row.try_get(2)?;
    Ok(FenceUpload {
        oid: row.try_get::<_, OidText>(0)?.0,
        did: row.try_get(1)?,
        step: step.0,
        upload_id: row.try_get(3)?,
    })
}

/// A step stored as [`FenceStep`] spells it.
struct StepText(FenceStep);

impl<'a> postgres::types::FromSql<'a> for StepText {
    fn from_sql(
        ty: &postgres::types::Type,
        raw: &'a [u8],
    ) -> Result<StepText, Box<dyn std::error::Error + Sync + Send>> {
        let text = <&str as postgres::types::FromSql>::from_sql(ty, raw)?;
        FenceStep::parse(text)
            .map(StepText)
            .ok_or_else(|| format!("{text:?} is not a Fence upload step").into())
    }

    fn accepts(ty: &postgres::types::Type) -> bool {
        <&str as postgres::types::FromSql>::accepts(ty)
    }
}
