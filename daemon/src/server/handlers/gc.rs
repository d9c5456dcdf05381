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
//!
//! An unreferenced entry goes only once no repo has referenced it for the
//! grace period (see [`SeenLog`]), and a gc with no repo registered at all
//! (a lost `repos.json` looks just like that) is refused unless forced.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{internal, Progressor, Shared};
use crate::blocking;
use crate::lfs::stored_pointers;
use crate::pool::{Oid, SeenLog, SweepReport};
use crate::registry::Registry;
use drsd_proto::{ErrorCode, GcEntry, GcReport, PartialsRemoved, Progress, Reply, WireError};

/// What a gc was asked to do.
pub(crate) struct Sweep {
    pub dry_run: bool,
    /// Sweep even with no repo registered.
    pub force: bool,
    /// Seconds an entry stays after it was last seen referenced.
    pub grace: u64,
}

/// The record of sightings, beside the pool.
const SEEN_FILE: &str = "gc.sqlite";

pub(crate) async fn handle(
    shared: &Shared,
    sweep: Sweep,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let Sweep {
        dry_run,
        force,
        grace,
    } = sweep;
    let repos = shared.repos.paths();
    if repos.is_empty() && !force {
        return Err(no_repos(&shared.config.state_dir));
    }
    let seen_path = shared.config.pool_dir.join(SEEN_FILE);
    progress
        .send(Progress {
            stage: drsd_proto::Stage::Gc,
            done: 0,
            total: None,
            message: Some(format!("reading the objects of {} repo(s)", repos.len())),
        })
        .await;
    let (pool, registry) = (shared.pool.clone(), shared.registry.clone());
    let count = repos.len();
    let (swept, waiting, compacted) = blocking(move || {
        // Listed first: an entry stored while the repos are read may be for
        // a pointer that arrived after its repo was read; it waits for the
        // next gc.
        let listed: HashSet<Vec<u8>> = pool.list().map_err(internal)?.into_iter().collect();
        let live = live_set(&registry, &repos)?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut seen = SeenLog::open(&seen_path).map_err(internal)?;
        let last = seen
            .last_referenced(&listed, &live, now, !dry_run)
            .map_err(internal)?;
        // Only entries past the grace are offered to the sweep; the others
        // are left as if listed after it began.
        let expired: HashSet<Vec<u8>> = listed
            .into_iter()
            .filter(|key| now.saturating_sub(last[key]) >= grace)
            .collect();
        let referenced = |key: &[u8]| Oid::from_key(key).is_some_and(|o| live.contains(&o));
        let waiting = last
            .keys()
            .filter(|key| !expired.contains(*key) && !referenced(key))
            .count();
        let swept = pool
            .sweep_listed(&expired, &live, !dry_run)
            .map_err(internal)?;
        let compacted = match dry_run {
            true => 0,
            false => pool.compact().map_err(internal)?,
        };
        Ok::<_, WireError>((swept, waiting, compacted))
    })
    .await?;
    let mut report = report(dry_run, count, swept, compacted);
    // The sweep counted the waiting entries with those stored after the
    // listing.
    report.recent -= waiting.min(report.recent);
    report.waiting = waiting;
    report.grace_secs = grace;
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
    blocking(move || crate::server::partials::sweep(&pool, &registry, dry_run))
        .await
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
            live.extend(hashed.get(&oid).copied());
            live.insert(oid);
        }
        for entry in registry.for_repo(repo).map_err(internal)? {
            live.extend(entry.object.content_oid);
        }
    }
    Ok(live)
}

fn no_repos(state_dir: &Path) -> WireError {
    WireError::new(
        ErrorCode::InvalidArgument,
        format!(
            "gc refused: no repo is registered, so every pool entry would look unreferenced \
             (was {} lost?). Register your repos again (`drsctl repos add PATH` or \
             `drsctl init PATH`), or run `drsctl gc --force` to sweep anyway (entries a repo \
             referenced within the grace period stay)",
            state_dir.join("repos.json").display()
        ),
    )
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
        waiting: 0,
        grace_secs: 0,
        partials: PartialsRemoved::default(),
    }
}
