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
//!
//! On a lab's shared pool (issue 31) a node's repos are on that node only,
//! so each gc publishes this node's roots per repo ([`TeamRoots`]) and
//! keeps whatever any node published, even with no grace; the grace
//! records and the pins are the team database's too ([`GcTeam`]). The
//! order of a gc's steps is what keeps a live entry's bytes: this node's
//! roots are committed before every node's are read, the grace records are
//! committed before anything is deleted, and each delete runs under the
//! pins' lock (see [`collect`]).

mod error;
pub(crate) mod partials;
mod pg_roots;
mod roots;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::pool::PoolCare;
use super::repos::{state_file, RepoBook};
use crate::blocking;
use crate::lfs::stored_pointers;
use crate::pg::PgServer;
use crate::pool::{GcRecords, Oid, PgGcRecords, Pool, PoolError, SeenLog, SweepReport};
use crate::registry::Registry;
use drsd_proto::{GcEntry, GcReport, PartialsRemoved};

pub use error::{ForgetError, GcError, PartialsSweepError};
pub use pg_roots::PgRoots;
pub use roots::{Forgotten, LocalRoots, PublishedRepo, RootsError, TeamRoots};

/// The record of sightings, beside the pool.
const SEEN_FILE: &str = "gc.sqlite";

/// A node's lease when none is set (`team_lease_secs`' default).
const DEFAULT_LEASE_SECS: u64 = 60;

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

/// Opens gc's grace records, once per gc.
pub type RecordsOpener = Box<dyn Fn() -> Result<Box<dyn GcRecords>, PoolError> + Send + Sync>;

/// What a gc shares with the other nodes of a lab (or, on one machine,
/// keeps to itself): where roots are published and the grace records.
pub struct GcTeam {
    /// This node's name among the published roots.
    pub node: String,
    pub roots: Box<dyn TeamRoots>,
    pub records: RecordsOpener,
    /// How long a node stays live without a heartbeat (`team_lease_secs`):
    /// one seen within it is never forgotten, and its last publish bounds
    /// what a gc may judge.
    pub lease_secs: u64,
    /// The least grace a gc gives entries of a shared pool, whatever it is
    /// asked (`team_min_grace_secs`); 0 on one machine.
    pub min_grace: u64,
}

impl GcTeam {
    /// One machine: roots in memory, the grace records in `gc.sqlite` in
    /// the pool folder.
    pub fn local(pool_dir: &Path) -> GcTeam {
        let seen = pool_dir.join(SEEN_FILE);
        GcTeam {
            node: "local".into(),
            roots: Box::new(LocalRoots::default()),
            records: Box::new(move || Ok(Box::new(SeenLog::open(&seen)?) as Box<dyn GcRecords>)),
            lease_secs: 0,
            min_grace: 0,
        }
    }

    /// The same team with its nodes' lease and its least grace, in seconds.
    pub fn with_limits(mut self, lease_secs: u64, min_grace: u64) -> GcTeam {
        self.lease_secs = lease_secs;
        self.min_grace = min_grace;
        self
    }

    /// A lab: roots and grace records in the team database on `server`,
    /// this node publishing as `node`. (The pins go with the pool:
    /// `Pool::with_pins(PgPins::new(server, node))`.)
    pub fn postgres(server: &Arc<PgServer>, node: &str) -> Result<GcTeam, GcError> {
        let roots = PgRoots::new(server.clone())?;
        PgGcRecords::new(server.clone())?;
        let server = server.clone();
        Ok(GcTeam {
            node: node.to_string(),
            roots: Box::new(roots),
            records: Box::new(move || {
                Ok(Box::new(PgGcRecords::new(server.clone())?) as Box<dyn GcRecords>)
            }),
            lease_secs: DEFAULT_LEASE_SECS,
            min_grace: 0,
        })
    }
}

/// The gc service.
pub struct Gc {
    pool: Arc<Pool>,
    registry: Arc<Registry>,
    book: Arc<RepoBook>,
    care: Arc<PoolCare>,
    /// Roots and grace records: this machine's, or the team's.
    team: Arc<GcTeam>,
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
            team: Arc::new(GcTeam::local(pool_dir)),
            state_file: state_file(state_dir),
        }
    }

    /// The same gc with its roots and grace records in `team` (a lab's
    /// database: [`GcTeam::postgres`]).
    pub fn with_team(mut self, team: GcTeam) -> Gc {
        self.team = Arc::new(team);
        self
    }

    /// Publishes the roots of this node's registered repos now (a gc does
    /// it first thing; a daemon in a team also does it after its scans, so
    /// a gc elsewhere sees repos this node has not gc'd lately). Returns the
    /// roots published.
    pub async fn publish_roots(&self) -> Result<usize, GcError> {
        let (registry, team, repos) = (self.registry.clone(), self.team.clone(), self.book.paths());
        blocking(move || {
            let own = own_roots(&registry, &repos)?;
            publish(&team, &own)
        })
        .await
    }

    /// Removes what node `node` published, so its repos no longer hold
    /// entries in the shared pool, and the node from the team's list. This
    /// node is refused: its next gc would publish its roots again. A node
    /// listed but with nothing published (it died before its first publish)
    /// is known too.
    pub async fn forget_node(&self, node: String) -> Result<Forgotten, ForgetError> {
        if node == self.team.node {
            return Err(ForgetError::Own { node });
        }
        let (team, registry) = (self.team.clone(), self.registry.clone());
        blocking(move || {
            let mut known = roots::node_names(&team.roots.nodes()?);
            let nodes = registry.team_nodes()?;
            // A node seen within its lease may be running: its repos' roots
            // may name what no one else's do.
            if let Some(live) = nodes
                .iter()
                .find(|n| n.name == node && n.seen_secs_ago < team.lease_secs)
            {
                return Err(ForgetError::Live {
                    node,
                    secs: live.seen_secs_ago,
                    lease: team.lease_secs,
                });
            }
            known.extend(nodes.into_iter().map(|n| n.name));
            known.sort();
            known.dedup();
            if !known.contains(&node) {
                return Err(ForgetError::Unknown { node, known });
            }
            // Roots first: a kill between the two leaves the node listed,
            // and forgetting it again finishes.
            let mut gone = team.roots.forget(&node)?;
            gone.listed = registry.forget_team_node(&node)?;
            Ok(gone)
        })
        .await
    }

    /// What each node has published, by node then repo.
    pub async fn published(&self) -> Result<Vec<PublishedRepo>, RootsError> {
        let team = self.team.clone();
        blocking(move || team.roots.nodes()).await
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
        // On a lab's shared pool no ask undercuts the team's least grace.
        let grace = grace.max(self.team.min_grace);
        let (pool, registry, team) = (self.pool.clone(), self.registry.clone(), self.team.clone());
        let Collected {
            swept,
            waiting,
            compacted,
            ..
        } = blocking(move || {
            let own = || own_roots(&registry, &repos);
            collect(&pool, &team, own, dry_run, grace)
        })
        .await?;
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

/// What [`collect`] did.
pub struct Collected {
    pub swept: SweepReport,
    /// Unreferenced entries still within their grace.
    pub waiting: usize,
    /// Bytes compaction gave back.
    pub compacted: u64,
    /// Oids any node's roots named.
    pub live: usize,
}

/// The pool's side of a gc: the entries no node's roots name and none has
/// referenced for `grace` seconds are deleted (with `dry_run`, counted).
/// `own` reads this node's roots, per repo; they are published even by a
/// dry run (what a node's repos hold is a fact to share, not a deletion).
/// Blocking.
///
/// The order is what keeps every live entry's bytes, whatever step a kill
/// stops it at:
/// 1. the pool is listed first: an entry stored while the roots are read
///    may be for a pointer that came after its repo was read; it waits for
///    the next gc;
/// 2. this node's roots are published (each repo's set replaced whole,
///    committed) before every node's are read, so what this node holds is
///    never judged by an older copy of itself;
/// 3. the grace records are committed before anything is deleted: a kill
///    after them deletes nothing, and the next gc starts over from them;
/// 4. each delete runs under the pins' lock, after the check that no put
///    pinned the key. A kill between two deletes (a kv row deleted, a large
///    file not yet unlinked) leaves only garbage behind: every key deleted
///    was unnamed by all roots, and the rest are left as they were.
pub fn collect(
    pool: &Pool,
    team: &GcTeam,
    own: impl FnOnce() -> Result<Vec<(String, HashSet<Oid>)>, GcError>,
    dry_run: bool,
    grace: u64,
) -> Result<Collected, GcError> {
    let listed: HashSet<Vec<u8>> = pool.list()?.into_iter().collect();
    let own = own()?;
    publish(team, &own)?;
    let mut live = team.roots.all_live()?;
    live.extend(own.into_iter().flat_map(|(_, oids)| oids));
    let quiet = team
        .roots
        .oldest_live_publish(&team.node, team.lease_secs)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut records = (team.records)()?;
    let last = records.last_referenced(&listed, &live, now, !dry_run)?;
    if !dry_run {
        crate::failpoint::hit("gc-after-records");
    }
    // What another live node's roots can tell only from its next publish
    // (an object it stored or first referenced since its last one) is not
    // judged yet: only entries last seen before that publish may go.
    let judged_until = quiet.map(|age| now.saturating_sub(age));
    // Only entries past the grace are offered to the sweep; the others
    // are left as if listed after it began. Another user's file in a
    // shared folder is that user's node's to remove: it may be the last
    // copy of something no remote holds yet.
    let expired: HashSet<Vec<u8>> = listed
        .into_iter()
        .filter(|key| now.saturating_sub(last[key]) >= grace)
        .filter(|key| judged_until.is_none_or(|until| last[key] < until))
        .filter(|key| !pool.stored_by_another(key).unwrap_or(true))
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
    Ok(Collected {
        swept,
        waiting,
        compacted,
        live: live.len(),
    })
}

/// Replaces this node's published roots with `own`, repo by repo, and
/// drops those of repos no longer registered. Returns the roots published.
fn publish(team: &GcTeam, own: &[(String, HashSet<Oid>)]) -> Result<usize, GcError> {
    for (repo, oids) in own {
        team.roots.publish(&team.node, repo, oids)?;
    }
    // The node's own mark: when it last published, even with no repo.
    team.roots
        .publish(&team.node, roots::NODE_MARK, &HashSet::new())?;
    let mut repos: Vec<String> = own.iter().map(|(repo, _)| repo.clone()).collect();
    repos.push(roots::NODE_MARK.to_string());
    team.roots.retain(&team.node, &repos)?;
    Ok(own.iter().map(|(_, oids)| oids.len()).sum())
}

/// Every oid each registered repo can need, per repo (named by its path).
pub(crate) fn own_roots(
    registry: &Registry,
    repos: &[PathBuf],
) -> Result<Vec<(String, HashSet<Oid>)>, GcError> {
    let hashed = registry.hashed()?;
    let mut out = Vec::with_capacity(repos.len());
    for repo in repos {
        let mut live = HashSet::new();
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
        out.push((repo.display().to_string(), live));
    }
    Ok(out)
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
