//! `drsctl prune`: frees this machine's copies (the repos' own in
//! `.git/lfs/objects`, and the pool's entries) of the objects nothing here
//! needs, each only once it is proven present in at least N places other
//! than this machine (DESIGN.md "Trust"): never the last copy.
//!
//! What a repo needs is git-lfs's own rule (`lfs::needed`), and what the
//! registry records for its foreign paths. A repo's copy goes when that
//! repo does not need it; the pool's entry only when no registered repo
//! does (nor a repo named), and not at all in a lab's shared pool, which
//! other nodes' repos read.
//!
//! The places are the object remotes of the repos an object is in, each
//! proven by the very check a push makes before it skips an upload
//! (`Remote::proves_held`): a folder remote's file is hashed; an S3 key is
//! shown by the ETag this daemon recorded when it sent it, by the store's
//! MD5 (single or multipart) against the bytes here, or read back and
//! hashed; a store the user trusts at its word (`trust_claims`) is
//! counted, and reported as trusted. A place that is absent, holds other
//! bytes, or cannot be asked keeps the object, and the report says which.
//!
//! Order, for a kill at any point: the proofs, then the repos' copies,
//! then the pool's entries through the pool's own sweep (under the pins'
//! lock, as gc deletes). Whatever a kill leaves, each object is in the
//! pool, in a repo, or in the proven places only, and a checkout or
//! `git lfs pull` fetches it back through the agent as any other.

mod copies;
mod error;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use super::pool::PoolCare;
use super::repos::{RepoBook, RepoLocks};
use super::transfer::PARALLEL;
use crate::blocking;
use crate::git::Repo;
use crate::lfs::needed::{needed_pointers, Recent};
use crate::pool::{Oid, Pool};
use crate::registry::Registry;
use crate::remote::{Held, ObjectRemote, Remote};
use copies::RepoCopy;
use drsd_proto::{ProvenCopy, PruneReport, PrunedObject};

pub use error::PruneError;

/// Objects decided, then freed, together: each batch's pool entries go in
/// one sweep.
const BATCH: usize = 512;

/// What a prune was asked.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The repos to free; none: every registered repo.
    pub repos: Vec<PathBuf>,
    pub dry_run: bool,
    /// Places other than this machine each object must be proven in.
    pub copies: u32,
}

/// Told after each object is decided: objects done, of how many, and the
/// object's line.
pub type Progress<'a> = &'a (dyn Fn(u64, u64, &PrunedObject, &[String]) + Sync);

/// The prune service.
pub struct Prune {
    pool: Arc<Pool>,
    remote: Arc<Remote>,
    registry: Arc<Registry>,
    book: Arc<RepoBook>,
    locks: Arc<RepoLocks>,
    care: Arc<PoolCare>,
    /// The pool is a lab's, read by other nodes' repos: never swept here.
    shared_pool: bool,
}

/// A repo whose copies are freed.
struct Target {
    top: PathBuf,
    common: PathBuf,
    /// Its object remote's place (index into the places), or why none.
    place: Result<usize, String>,
}

/// An object nothing in some target needs, and its copies here.
struct Candidate {
    oid: Oid,
    size: u64,
    /// (target, copy) for each target repo's copy that may go.
    copies: Vec<(usize, RepoCopy)>,
    /// The pool's entry may go: no repo needs it. Swept even when the
    /// pool held none at the listing (a proof may read it back in).
    sweep: bool,
    /// The pool's entry's bytes, when it held one at the listing.
    pooled: Option<u64>,
    /// The places to prove it in (indices), and why some cannot be.
    places: BTreeSet<usize>,
    unplaced: Vec<String>,
}

/// What the needs of the repos say, found before anything is proven.
struct Plan {
    targets: Vec<Target>,
    places: Vec<ObjectRemote>,
    candidates: Vec<Candidate>,
    needed: u64,
}

impl Prune {
    pub(crate) fn new(
        pool: Arc<Pool>,
        remote: Arc<Remote>,
        registry: Arc<Registry>,
        book: Arc<RepoBook>,
        locks: Arc<RepoLocks>,
        care: Arc<PoolCare>,
        shared_pool: bool,
    ) -> Prune {
        Prune {
            pool,
            remote,
            registry,
            book,
            locks,
            care,
            shared_pool,
        }
    }

    /// Frees (with `dry_run`, lists) what `ask` says; `progress` hears of
    /// each object as it is decided.
    pub async fn run(&self, ask: Ask, progress: Progress<'_>) -> Result<PruneReport, PruneError> {
        let started = std::time::Instant::now();
        let plan = self.plan(&ask).await?;
        let names: Vec<String> = plan.places.iter().map(ObjectRemote::url).collect();
        let mut report = PruneReport {
            dry_run: ask.dry_run,
            copies: ask.copies,
            repos: plan.targets.iter().map(|t| t.top.clone()).collect(),
            places: names.clone(),
            needed: plan.needed,
            ..PruneReport::default()
        };
        let total = plan.candidates.len() as u64;
        let mut kv_freed = false;
        let mut candidates = plan.candidates.into_iter().peekable();
        while candidates.peek().is_some() {
            let batch: Vec<Candidate> = candidates.by_ref().take(BATCH).collect();
            let decided = self.decide(&plan.places, batch, ask.copies).await;
            let freed = self.free(&plan.targets, decided, ask.dry_run).await?;
            kv_freed |= freed.kv;
            report.proofs += freed.proofs;
            report.bytes += freed.bytes;
            let lines = freed.lines;
            for line in lines {
                if line.freed {
                    report.freed += 1;
                }
                report.objects.push(line);
                let done = report.objects.len() as u64;
                progress(done, total, report.objects.last().expect("pushed"), &names);
            }
        }
        if kv_freed {
            let pool = self.pool.clone();
            blocking(move || pool.compact()).await?;
        }
        if !ask.dry_run {
            self.care.refresh().await;
        }
        log::info!(
            "prune{}: {} of {} unneeded objects freed ({} bytes), {} proofs, in {:.2} s",
            if ask.dry_run { " (dry run)" } else { "" },
            report.freed,
            total,
            report.bytes,
            report.proofs,
            started.elapsed().as_secs_f64()
        );
        Ok(report)
    }

    /// The targets, what every repo needs, and the objects that may go.
    async fn plan(&self, ask: &Ask) -> Result<Plan, PruneError> {
        let named = ask.repos.clone();
        let registered = self.book.paths();
        let (pool, registry, shared) = (self.pool.clone(), self.registry.clone(), self.shared_pool);
        blocking(move || plan(&pool, &registry, shared, named, registered)).await
    }

    /// Proves each candidate in its places, `PARALLEL` at a time.
    async fn decide(
        &self,
        places: &[ObjectRemote],
        batch: Vec<Candidate>,
        copies: u32,
    ) -> Vec<(Candidate, PrunedObject, u64)> {
        stream::iter(batch)
            .map(|c| async move {
                let (line, asked) = self.prove(places, &c, copies).await;
                (c, line, asked)
            })
            .buffered(PARALLEL)
            .collect()
            .await
    }

    /// Where `c` is proven: freed when in at least `copies` places.
    async fn prove(
        &self,
        places: &[ObjectRemote],
        c: &Candidate,
        copies: u32,
    ) -> (PrunedObject, u64) {
        let mut line = PrunedObject {
            oid: c.oid,
            size: c.size,
            proven: Vec::new(),
            freed: false,
            kept: None,
            repo_copies: c.copies.len() as u32,
            pool: c.sweep && c.pooled.is_some(),
        };
        let mut why: Vec<String> = c.unplaced.clone();
        if (c.places.len() as u64) < u64::from(copies) {
            why.push(format!(
                "{} place(s) other than this machine can hold it, and {copies} are asked for",
                c.places.len()
            ));
            line.kept = Some(why.join("; "));
            return (line, 0);
        }
        let mut asked = 0;
        for &i in &c.places {
            let place = &places[i];
            asked += 1;
            let held = self
                .remote
                .proves_held(self.pool.clone(), place, c.oid, c.size)
                .await;
            match held {
                Ok(Held::Proven) => line.proven.push(ProvenCopy {
                    place: i as u32,
                    how: "proven".into(),
                }),
                Ok(Held::Trusted) => line.proven.push(ProvenCopy {
                    place: i as u32,
                    how: "trusted".into(),
                }),
                Ok(Held::Absent) => why.push(format!("not in {place}")),
                Ok(Held::Other(other)) => why.push(other),
                Err(e) => why.push(format!("{place} could not be asked: {e}")),
            }
        }
        if line.proven.len() as u64 >= u64::from(copies) && copies > 0 {
            line.freed = true;
        } else {
            why.push(format!(
                "proven in {} place(s), {copies} asked for",
                line.proven.len()
            ));
            line.kept = Some(why.join("; "));
        }
        (line, asked)
    }

    /// Frees the batch's proven objects: the repos' copies (each repo's
    /// under its write lock), then the pool's entries in one sweep.
    async fn free(
        &self,
        targets: &[Target],
        decided: Vec<(Candidate, PrunedObject, u64)>,
        dry_run: bool,
    ) -> Result<Freed, PruneError> {
        let proofs = decided.iter().map(|(_, _, n)| n).sum();
        let freed: Vec<&Candidate> = decided
            .iter()
            .filter(|(_, line, _)| line.freed)
            .map(|(c, _, _)| c)
            .collect();
        let mut bytes = 0;
        if dry_run {
            for c in &freed {
                bytes += c.pooled.filter(|_| c.sweep).unwrap_or(0);
                bytes += c
                    .copies
                    .iter()
                    .filter(|(_, r)| r.links == 1)
                    .map(|(_, r)| r.len)
                    .sum::<u64>();
            }
            return Ok(Freed {
                lines: lines(decided),
                proofs,
                bytes,
                kv: false,
            });
        }
        let mut by_target: BTreeMap<usize, Vec<Oid>> = BTreeMap::new();
        for c in &freed {
            for (t, _) in &c.copies {
                by_target.entry(*t).or_default().push(c.oid);
            }
        }
        for (t, oids) in by_target {
            let target = &targets[t];
            let _held = self.locks.lock(&target.top).await;
            let common = target.common.clone();
            bytes += blocking(move || -> Result<u64, PruneError> {
                let mut freed = 0;
                for oid in &oids {
                    freed += copies::remove(&common, oid)?;
                }
                Ok(freed)
            })
            .await?;
        }
        crate::failpoint::hit("prune-after-repo-copies");
        let pooled: Vec<Oid> = freed.iter().filter(|c| c.sweep).map(|c| c.oid).collect();
        let pool = self.pool.clone();
        let swept = blocking(move || pool.sweep_chosen(&pooled, true)).await?;
        let kv = swept
            .deleted
            .iter()
            .any(|s| s.tier == crate::pool::Tier::Kv);
        bytes += swept.deleted.iter().map(|s| s.bytes).sum::<u64>();
        let gone: HashSet<Vec<u8>> = swept.deleted.into_iter().map(|s| s.key).collect();
        let mut lines = lines(decided);
        // An entry a put pinned meanwhile, or one gone already, stayed.
        for line in lines.iter_mut().filter(|l| l.freed) {
            line.pool &= gone.contains(line.oid.as_bytes().as_slice());
        }
        Ok(Freed {
            lines,
            proofs,
            bytes,
            kv,
        })
    }
}

/// What freeing one batch did.
struct Freed {
    lines: Vec<PrunedObject>,
    /// Proofs asked of the places.
    proofs: u64,
    /// Bytes given back (or, in a dry run, that would be).
    bytes: u64,
    /// The kv tier lost entries: worth a compaction.
    kv: bool,
}

fn lines(decided: Vec<(Candidate, PrunedObject, u64)>) -> Vec<PrunedObject> {
    decided.into_iter().map(|(_, line, _)| line).collect()
}

/// Finds the targets (`named`, else every registered repo), what each
/// repo (registered or named) needs, and the objects that may go. A repo
/// whose needs cannot be read stops the prune: its objects would look
/// unneeded. Blocking.
fn plan(
    pool: &Pool,
    registry: &Registry,
    shared_pool: bool,
    named: Vec<PathBuf>,
    registered: Vec<PathBuf>,
) -> Result<Plan, PruneError> {
    let asked = if named.is_empty() {
        registered.clone()
    } else {
        named
    };
    if asked.is_empty() {
        return Err(PruneError::NoRepos);
    }
    let mut places: Vec<ObjectRemote> = Vec::new();
    let mut targets = Vec::new();
    for path in asked {
        let repo = Repo::locate(&path).map_err(PruneError::NotInRepo)?;
        let place = match crate::lfs::setup::recorded(&repo.top) {
            Ok(s) => match s.remote.as_deref().map(ObjectRemote::parse) {
                Some(Ok(remote)) => Ok(place_of(&mut places, remote)),
                Some(Err(e)) => Err(format!("{}: its object remote: {e}", repo.top.display())),
                None => Err(format!("{} records no object remote", repo.top.display())),
            },
            Err(source) => {
                return Err(PruneError::Settings {
                    repo: repo.top,
                    source,
                })
            }
        };
        if targets.iter().any(|t: &Target| t.top == repo.top) {
            continue;
        }
        targets.push(Target {
            top: repo.top,
            common: repo.common_dir,
            place,
        });
    }
    let hashed = registry.hashed()?;
    let needs = |repo: &Path| -> Result<HashSet<Oid>, PruneError> {
        let unreadable = |source| PruneError::Unreadable {
            repo: repo.to_path_buf(),
            source,
        };
        let recent = Recent::read(repo).map_err(unreadable)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut set = HashSet::new();
        for oid in needed_pointers(repo, &recent, now).map_err(unreadable)? {
            set.extend(hashed.get(&oid).copied());
            set.insert(oid);
        }
        // A foreign object's pointer written but not staged yet is in no
        // tree or index: its file in the work tree is what needs it. One
        // removed since (`git rm`) needs nothing.
        for entry in registry.for_repo(repo)? {
            if std::fs::symlink_metadata(repo.join(&entry.path)).is_ok() {
                set.extend(entry.object.content_oid);
                set.insert(entry.oid);
            }
        }
        Ok(set)
    };
    let mut everyone: HashSet<Oid> = HashSet::new();
    let mut own: Vec<HashSet<Oid>> = Vec::new();
    for t in &targets {
        let set = needs(&t.top)?;
        everyone.extend(set.iter().copied());
        own.push(set);
    }
    for repo in registered
        .iter()
        .filter(|r| !targets.iter().any(|t| &t.top == *r))
    {
        everyone.extend(needs(repo)?);
    }
    let mut candidates: BTreeMap<Oid, Candidate> = BTreeMap::new();
    let mut needed: HashSet<Oid> = HashSet::new();
    for (i, t) in targets.iter().enumerate() {
        let unneeded_here = |oid: &Oid| !own[i].contains(oid);
        for copy in copies::list(&t.common)? {
            if !unneeded_here(&copy.oid) {
                needed.insert(copy.oid);
                continue;
            }
            let c = candidate(&mut candidates, copy.oid, copy.len);
            add_place(c, t);
            c.copies.push((i, copy));
        }
        // Objects its history names that only the pool holds here.
        let stored =
            crate::lfs::stored_pointers(&t.top).map_err(|source| PruneError::Unreadable {
                repo: t.top.clone(),
                source,
            })?;
        for oid in stored.into_iter().filter(unneeded_here) {
            if candidates.contains_key(&oid) {
                continue;
            }
            if let Some(size) = pool.size(&oid)? {
                add_place(candidate(&mut candidates, oid, size), t);
            }
        }
    }
    let mut out = Vec::with_capacity(candidates.len());
    for (oid, mut c) in candidates {
        if !shared_pool && !everyone.contains(&oid) {
            c.sweep = true;
            c.pooled = pool.size(&oid)?;
        }
        if c.copies.is_empty() && !c.sweep {
            continue; // only the pool holds it, and another repo needs it
        }
        out.push(c);
    }
    Ok(Plan {
        targets,
        places,
        candidates: out,
        needed: needed.len() as u64,
    })
}

fn place_of(places: &mut Vec<ObjectRemote>, remote: ObjectRemote) -> usize {
    match places.iter().position(|p| p.url() == remote.url()) {
        Some(i) => i,
        None => {
            places.push(remote);
            places.len() - 1
        }
    }
}

fn candidate(all: &mut BTreeMap<Oid, Candidate>, oid: Oid, size: u64) -> &mut Candidate {
    all.entry(oid).or_insert_with(|| Candidate {
        oid,
        size,
        copies: Vec::new(),
        sweep: false,
        pooled: None,
        places: BTreeSet::new(),
        unplaced: Vec::new(),
    })
}

fn add_place(c: &mut Candidate, t: &Target) {
    match &t.place {
        Ok(i) => {
            c.places.insert(*i);
        }
        Err(why) if !c.unplaced.contains(why) => c.unplaced.push(why.clone()),
        Err(_) => {}
    }
}
