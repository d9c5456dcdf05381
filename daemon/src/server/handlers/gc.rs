//! `gc`: deletes the pool entries no registered repo can need.
//!
//! The live set is every LFS pointer in each registered repo's object
//! database (all refs, the index, stashes, reflogs, worktrees, even
//! unreachable blobs: more than is reachable, never less), a provisional
//! oid counting for its content oid, plus the content oids the registry
//! records for the repos' foreign paths (a pointer written but not yet
//! staged). Entries pinned by a put in flight stay, and so do those stored
//! after the gc listed the pool (see [`handle`]). A registered repo that
//! cannot be read stops the gc, since its objects would look unreferenced.
//! Only the pool is swept: a repo's own `.git/lfs/objects` is never touched,
//! so a removed entry still linked into a repo frees nothing there.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{internal, Progressor, Shared};
use crate::ipc::{ErrorCode, GcEntry, GcReport, PartialsRemoved, Progress, Reply, WireError};
use crate::lfs::stored_pointers;
use crate::pool::{Oid, SweepReport};
use crate::registry::Registry;

pub(crate) async fn handle(
    shared: &Shared,
    dry_run: bool,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let repos = shared.repos.paths();
    progress
        .send(Progress {
            stage: "gc".into(),
            done: 0,
            total: None,
            message: Some(format!("reading the objects of {} repo(s)", repos.len())),
        })
        .await;
    let (pool, registry) = (shared.pool.clone(), shared.registry.clone());
    let count = repos.len();
    let (swept, compacted) = tokio::task::spawn_blocking(move || {
        // Listed first: an entry stored while the repos are read may be for
        // a pointer that arrived after its repo was read; it waits for the
        // next gc.
        let listed = pool.list().map_err(internal)?.into_iter().collect();
        let live = live_set(&registry, &repos)?;
        let swept = pool
            .sweep_listed(&listed, &live, !dry_run)
            .map_err(internal)?;
        let compacted = match dry_run {
            true => 0,
            false => pool.compact().map_err(internal)?,
        };
        Ok::<_, WireError>((swept, compacted))
    })
    .await
    .map_err(internal)??;
    let mut report = report(dry_run, count, swept, compacted);
    report.partials = sweep_partials(shared, dry_run).await?;
    if !dry_run {
        shared.pool_stats.refresh(&shared.pool).await;
        log::info!(
            "gc: removed {} pool entries ({} bytes), kept {}",
            report.removed.len(),
            report.bytes,
            report.kept
        );
    }
    Ok(Reply::Gc(report))
}

/// The partial downloads no job will resume (`server::partials`).
async fn sweep_partials(shared: &Shared, dry_run: bool) -> Result<PartialsRemoved, WireError> {
    let (pool, registry) = (shared.pool.clone(), shared.registry.clone());
    tokio::task::spawn_blocking(move || crate::server::partials::sweep(&pool, &registry, dry_run))
        .await
        .map_err(internal)?
        .map_err(|why| {
            WireError::new(
                ErrorCode::Internal,
                format!("gc of partial downloads: {why}"),
            )
        })
}

fn live_set(registry: &Registry, repos: &[PathBuf]) -> Result<HashSet<Oid>, WireError> {
    let hashed = registry.hashed().map_err(internal)?;
    let mut live = HashSet::new();
    for repo in repos {
        let pointers = stored_pointers(repo).map_err(|e| unreadable(repo, e))?;
        for oid in pointers {
            live.extend(
                hashed
                    .get(&oid.to_hex())
                    .and_then(|c| c.parse::<Oid>().ok()),
            );
            live.insert(oid);
        }
        for entry in registry.for_repo(repo).map_err(internal)? {
            let content = entry.object.content_oid.as_deref();
            live.extend(content.and_then(|c| c.parse::<Oid>().ok()));
        }
    }
    Ok(live)
}

fn unreadable(repo: &Path, why: impl std::fmt::Display) -> WireError {
    let shown = repo.display();
    WireError::new(
        ErrorCode::NotFound,
        format!(
            "gc stopped: the registered repo {shown} cannot be read ({why}), and what it \
             needs would look unreferenced; bring it back, or `drsctl repos remove {shown}`"
        ),
    )
}

fn report(dry_run: bool, repos: usize, swept: SweepReport, compacted: u64) -> GcReport {
    let removed: Vec<GcEntry> = swept
        .deleted
        .into_iter()
        .map(|s| GcEntry {
            key: hex::encode(&s.key),
            tier: s.tier,
            bytes: s.bytes,
        })
        .collect();
    GcReport {
        dry_run,
        repos,
        kept: swept.kept,
        recent: swept.pinned + swept.newer,
        bytes: removed.iter().map(|e| e.bytes).sum(),
        removed,
        compacted,
        partials: PartialsRemoved::default(),
    }
}
