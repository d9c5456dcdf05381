//! Garbage collection: deletes the pool entries no registered repo can
//! need, and the partial downloads no job will resume (`partials.rs`,
//! which also caps those of failed jobs). The pool keeps only its sweep of
//! what it is offered; what is live, and for how long an entry is spared,
//! is decided here.
//!
//! The live set is every LFS pointer in each registered repo's object
//! database (all refs, the index, stashes, reflogs, worktrees, even
//! unreachable blobs: more than is reachable, never less), a provisional
//! oid counting for its content oid, plus the content oids the registry
//! records for the repos' foreign paths (a pointer written but not yet
//! staged). Entries pinned by a put in flight stay, and so do those stored
//! after the gc listed the pool (see [`Gc::run`]). A registered repo that
//! cannot be read stops the gc, since its objects would look unreferenced.
//! Only the pool is swept: a repo's own `.git/lfs/objects` is never touched,
//! so a removed entry still linked into a repo frees nothing there.
//!
//! An unreferenced entry goes only once no repo has referenced it for the
//! grace period (see [`SeenLog`]: the grace records), and a gc with no repo
//! registered at all (a lost `repos.json` looks just like that) is refused
//! unless forced.

mod error;
pub(crate) mod partials;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::pool::PoolCare;
use super::repos::{state_file, RepoBook};
use crate::blocking;
use crate::lfs::stored_pointers;
use crate::pool::{Oid, Pool, SeenLog, SweepReport};
use crate::registry::Registry;
use drsd_proto::{GcEntry, GcReport, PartialsRemoved};

pub use error::{GcError, PartialsSweepError};

/// The record of sightings, beside the pool.
const SEEN_FILE: &str = "gc.sqlite";

/// What a gc was asked to do.
#[derive(Debug, Clone, Copy)]
pub struct Sweep {
    pub dry_run: bool,
    /// Sweep even with no repo registered.
    pub force: bool,
    /// Seconds an entry stays after it was last seen referenced.
    pub grace: u64,
}

/// A gc allowed to run, over the repos registered when it was planned.
pub struct Plan {
    sweep: Sweep,
    repos: Vec<PathBuf>,
}

impl Plan {
    /// How many repos' objects it reads.
    pub fn repos(&self) -> usize {
        self.repos.len()
    }
}

/// The gc service.
pub struct Gc {
    pool: Arc<Pool>,
    registry: Arc<Registry>,
    book: Arc<RepoBook>,
    care: Arc<PoolCare>,
    /// The grace records (`gc.sqlite` in the pool folder).
    seen: PathBuf,
    /// The repo book's file, named when a gc is refused for want of repos.
    state_file: PathBuf,
}

impl Gc {
    pub(crate) fn new(
        pool: Arc<Pool>,
        registry: Arc<Registry>,
        book: Arc<RepoBook>,
        care: Arc<PoolCare>,
        pool_dir: &Path,
        state_dir: &Path,
    ) -> Gc {
        Gc {
            pool,
            registry,
            book,
            care,
            seen: pool_dir.join(SEEN_FILE),
            state_file: state_file(state_dir),
        }
    }

    /// The gc `sweep` asks for, over the repos registered now; refused with
    /// none registered unless forced.
    pub fn plan(&self, sweep: Sweep) -> Result<Plan, GcError> {
        let repos = self.book.paths();
        if repos.is_empty() && !sweep.force {
            return Err(GcError::NoRepos {
                state_file: self.state_file.clone(),
            });
        }
        Ok(Plan { sweep, repos })
    }

    /// Runs a planned gc: the pool's unreferenced entries past the grace,
    /// then the partial downloads no job will resume.
    pub async fn run(&self, plan: Plan) -> Result<GcReport, GcError> {
        let Plan {
            sweep:
                Sweep {
                    dry_run,
                    force: _,
                    grace,
                },
            repos,
        } = plan;
        let count = repos.len();
        let (pool, registry, seen) = (self.pool.clone(), self.registry.clone(), self.seen.clone());
        let (swept, waiting, compacted) =
            blocking(move || sweep_pool(&pool, &registry, &repos, &seen, dry_run, grace)).await?;
        let mut report = report(dry_run, count, swept, compacted);
        // The sweep counted the waiting entries with those stored after the
        // listing.
        report.recent -= waiting.min(report.recent);
        report.waiting = waiting;
        report.grace_secs = grace;
        report.partials = self.sweep_partials(dry_run).await?;
        if !dry_run {
            self.care.refresh().await;
            log::info!(
                "gc: removed {} pool entries ({} bytes), kept {}",
                report.removed.len(),
                report.bytes,
                report.kept
            );
        }
        Ok(report)
    }

    /// The partial downloads no job will resume (`partials.rs`).
    async fn sweep_partials(&self, dry_run: bool) -> Result<PartialsRemoved, GcError> {
        let (pool, registry) = (self.pool.clone(), self.registry.clone());
        blocking(move || partials::sweep(&pool, &registry, dry_run))
            .await
            .map_err(GcError::Partials)
    }
}

/// The pool's sweep of the entries unreferenced for `grace` seconds:
/// what was swept, how many wait for their grace to pass, and the bytes
/// compaction freed. Blocking.
fn sweep_pool(
    pool: &Pool,
    registry: &Registry,
    repos: &[PathBuf],
    seen_path: &Path,
    dry_run: bool,
    grace: u64,
) -> Result<(SweepReport, usize, u64), GcError> {
    // Listed first: an entry stored while the repos are read may be for
    // a pointer that arrived after its repo was read; it waits for the
    // next gc.
    let listed: HashSet<Vec<u8>> = pool.list()?.into_iter().collect();
    let live = live_set(registry, repos)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut seen = SeenLog::open(seen_path)?;
    let last = seen.last_referenced(&listed, &live, now, !dry_run)?;
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
    let swept = pool.sweep_listed(&expired, &live, !dry_run)?;
    let compacted = match dry_run {
        true => 0,
        false => pool.compact()?,
    };
    Ok((swept, waiting, compacted))
}

/// Every oid a registered repo can need.
fn live_set(registry: &Registry, repos: &[PathBuf]) -> Result<HashSet<Oid>, GcError> {
    let hashed = registry.hashed()?;
    let mut live = HashSet::new();
    for repo in repos {
        let pointers = stored_pointers(repo).map_err(|source| GcError::Unreadable {
            repo: repo.clone(),
            source,
        })?;
        for oid in pointers {
            live.extend(hashed.get(&oid).copied());
            live.insert(oid);
        }
        for entry in registry.for_repo(repo)? {
            live.extend(entry.object.content_oid);
        }
    }
    Ok(live)
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
