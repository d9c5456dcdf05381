//! Keeps the pool's partial downloads from filling its disk for good (see
//! `remote::partials`): after a prefetch fails, the partials of failed jobs
//! are capped; a gc removes those no job that can still run owns.

use std::collections::HashSet;
use std::path::PathBuf;

use super::error::PartialsSweepError;
use crate::pool::Pool;
use crate::registry::{JobState, Registry};
use crate::remote::partials;
use drsd_proto::PartialsRemoved;

/// The partial file names of the jobs in any of `states`.
fn owned_by(
    registry: &Registry,
    states: &[JobState],
) -> Result<HashSet<String>, PartialsSweepError> {
    let objects = registry.job_objects(states)?;
    Ok(objects.iter().filter_map(partials::name_of).collect())
}

/// After a prefetch failed: the partials of failed jobs in `dir` (the
/// pool's partial folder) hold at most `max` bytes (`DRSD_PARTIAL_MAX`),
/// the oldest going first.
pub(crate) async fn cap_failed(registry: std::sync::Arc<Registry>, dir: PathBuf, max: u64) {
    let capped = crate::blocking(move || {
        let failed = owned_by(&registry, &[JobState::Failed])?;
        let dir = partials::PartialsDir::open(&dir)?;
        partials::cap(&dir, &failed, max).map_err(PartialsSweepError::from)
    })
    .await;
    match capped {
        Ok(r) if r.files > 0 => log::info!(
            "removed {} partial download(s) of failed jobs ({} bytes): over the {max}-byte cap",
            r.files,
            r.bytes
        ),
        Ok(_) => {}
        Err(e) => log::warn!("capping partial downloads: {e}"),
    }
}

/// For gc: removes the partials no queued, running or failed job owns (and
/// that no download wrote to lately). Blocking.
pub(super) fn sweep(
    pool: &Pool,
    registry: &Registry,
    dry_run: bool,
) -> Result<PartialsRemoved, PartialsSweepError> {
    let Some(dir) = pool.partial_dir() else {
        return Ok(PartialsRemoved::default());
    };
    // Checked again and held open: a folder swapped for a link since the
    // daemon started is refused, and nothing behind the link is removed.
    let dir = &partials::PartialsDir::open(dir)?;
    let owned = owned_by(
        registry,
        &[JobState::Queued, JobState::Running, JobState::Failed],
    )?;
    let now = std::time::SystemTime::now();
    let removed = match dry_run {
        true => partials::count_unowned(dir, &owned, now),
        false => partials::remove_unowned(dir, &owned, now),
    }?;
    Ok(PartialsRemoved {
        files: removed.files,
        bytes: removed.bytes,
    })
}
