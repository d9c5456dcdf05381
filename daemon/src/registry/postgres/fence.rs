//! [`PgRegistry`]'s uploads through a Gen3 commons' Fence, step by step
//! (`registry/fence_uploads.rs` says what each step means). Shared by the
//! team: the blank record one node began is the one another node's push
//! finishes.

use postgres::Row;

use super::rows::{big, OidText};
use super::PgRegistry;
use crate::pool::Oid;
use crate::registry::engine::FenceUploads;
use crate::registry::{now, FenceStep, FenceUpload, RegistryError};

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
            Ok(())
        })
    }

    fn fence_forget(&self, commons: &str, oid: Oid) -> Result<(), RegistryError> {
        self.tx("forget a Fence upload", |tx| {
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
