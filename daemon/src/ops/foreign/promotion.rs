//! The one path from provisional pointers to content pointers, once their
//! objects are hashed: a large object linked into the repo's
//! `.git/lfs/objects` (see [`reachable`] for the small ones), the pointers
//! rewritten in the work tree and the index (never in a commit:
//! the user commits), the registry and the repo's mirror told the new oids.
//!
//! Taken for three reasons ([`Trigger`]): a worker hashed an object, a
//! repo catches up with objects hashed while the workers could not reach
//! it, or the user runs `drsctl promote`. Each runs as the repo's one
//! writer, so what one of them promoted first the next finds done.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::{ForeignError, ForeignObjects, Waiting};
use crate::git::Repo;
use crate::lfs::hydrate::object_path;
use crate::lfs::promote::{promote, Promoted, Rewrite, Scope};
use crate::lfs::{hydrate, Hydrated, Pointer};
use crate::pool::{Oid, Pool, PoolError, Tier};
use crate::registry::{Entry, ForeignObject, Registry};

/// An object a worker hashed, waiting for its repo's next promotion batch.
#[derive(Debug, Clone, Copy)]
struct HashedObject {
    provisional: Oid,
    size: u64,
    content: Oid,
}

/// Hashed objects waiting to be promoted, by repo. A repo is listed while
/// a caller of [`ForeignObjects::promote_hashed`] drains it.
#[derive(Default)]
pub(crate) struct PendingPromotions(std::sync::Mutex<HashMap<PathBuf, Vec<HashedObject>>>);

impl PendingPromotions {
    /// Adds `hashed` to `repo`'s list; true when the list was not there,
    /// so the caller is the one to drain it.
    fn join(&self, repo: &Path, hashed: HashedObject) -> bool {
        let mut pending = crate::lock::lock(&self.0);
        match pending.get_mut(repo) {
            Some(list) => {
                list.push(hashed);
                false
            }
            None => {
                pending.insert(repo.to_path_buf(), vec![hashed]);
                true
            }
        }
    }

    /// The next batch of `repo`; `None` (and the repo unlisted, so the next
    /// [`join`](Self::join) drains) when nothing is waiting.
    fn take(&self, repo: &Path) -> Option<Vec<HashedObject>> {
        let mut pending = crate::lock::lock(&self.0);
        let list = pending.get_mut(repo)?;
        if list.is_empty() {
            pending.remove(repo);
            return None;
        }
        Some(std::mem::take(list))
    }
}

/// Why pointers are promoted; decides which ones and what to do when the
/// pool lacks the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The daemon on its own (an object hashed, a catch-up): only pointers
    /// not committed yet, and only to bytes this machine holds, since a
    /// pointer naming bytes no one here can give would break a checkout.
    Hashed,
    /// `drsctl promote`: committed pointers too (the user then commits),
    /// whether or not the pool holds the bytes.
    Asked,
}

impl Trigger {
    fn scope(self) -> Scope {
        match self {
            Trigger::Hashed => Scope::Uncommitted,
            Trigger::Asked => Scope::All,
        }
    }
}

/// A repo's work tree and common git folder.
struct RepoAt<'a> {
    top: &'a Path,
    common: &'a Path,
}

/// What a promotion did: git's account, how many paths the registry
/// learnt a content oid for, and the entries left as they were because
/// this node must hash their object itself first ([`vouched`]).
#[derive(Default)]
struct Done {
    promoted: Promoted,
    recorded: usize,
    unvouched: Vec<Entry>,
}

/// Whether a content oid another node recorded is taken where the source
/// gives nothing to check it against (`team_trust_members`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MembersWord {
    Taken,
    /// Only this node's own hash of the object promotes its pointers.
    Refused,
}

/// What `drsctl promote` asks: the wire's request, taken as it is.
pub use drsd_proto::PromoteRequest;

/// What `drsctl promote` did, by path relative to the repo's top.
#[derive(Debug, Default)]
pub struct PromoteOutcome {
    pub repo: PathBuf,
    pub rewritten: Vec<String>,
    /// Provisional still: the object is not hashed yet.
    pub waiting: Vec<Waiting>,
    /// The index or the work tree no longer holds the provisional pointer.
    pub changed: Vec<String>,
}

/// Repos waiting for their index refresh after a promotion.
#[derive(Default)]
pub(super) struct IndexRefresh(std::sync::Mutex<HashSet<PathBuf>>);

impl IndexRefresh {
    /// Whether `repo` was not waiting already (the caller starts the wait).
    fn ask(&self, repo: &Path) -> bool {
        crate::lock::lock(&self.0).insert(repo.to_path_buf())
    }

    /// The wait is over: a promotion from now on asks again.
    fn taken(&self, repo: &Path) {
        crate::lock::lock(&self.0).remove(repo);
    }
}

/// Hydrates each target's content oid into the repo and rewrites the
/// provisional pointers among them to it, in one pass of git for all; the
/// paths rewritten are recorded with their new oid and the mirror written.
/// `targets` pairs an entry with the content oid its pointer becomes.
fn promote_to_content(
    pool: &Pool,
    registry: &Registry,
    at: RepoAt<'_>,
    targets: Vec<(Entry, Oid)>,
    trigger: Trigger,
    word: MembersWord,
) -> Result<Done, ForeignError> {
    let lfs = at.common.join("lfs");
    let mut here: HashMap<Oid, bool> = HashMap::new();
    let mut ready = Vec::with_capacity(targets.len());
    let mut unvouched = Vec::new();
    for (entry, said) in targets {
        let Some(to) = vouched(registry, &entry, said, word)? else {
            unvouched.push(entry);
            continue;
        };
        if to != said {
            log::warn!(
                "{}: {}: the team's registry says its object is {said}, this node's own fetch \
                 hashed it to {to}: {to} is taken",
                at.top.display(),
                entry.path
            );
        }
        if let Some(why) = disagrees(pool, &entry, &to)? {
            log::warn!(
                "{}: {} not promoted to {to}: {why}",
                at.top.display(),
                entry.path
            );
            continue;
        }
        let held = match here.get(&to) {
            Some(held) => *held,
            None => *here
                .entry(to)
                .or_insert(reachable(pool, &lfs, &to, entry.object.size)?),
        };
        if held || trigger == Trigger::Asked {
            ready.push((entry, to));
        }
    }
    let rewrites: Vec<Rewrite> = ready
        .iter()
        .filter(|(e, to)| e.oid != *to)
        .map(|(e, to)| rewrite(e, *to))
        .collect();
    let promoted = promote(at.top, &rewrites, trigger.scope())?;
    let done: HashSet<&str> = promoted
        .rewritten
        .iter()
        .chain(&promoted.already)
        .map(String::as_str)
        .collect();
    let changed: Vec<Entry> = ready
        .iter()
        .filter(|(e, to)| e.oid != *to && done.contains(e.path.as_str()))
        .map(|(e, to)| Entry {
            oid: *to,
            ..e.clone()
        })
        .collect();
    // Every target's object has a content oid the mirror may not show yet,
    // whether or not its pointer was rewritten (a committed one is not).
    let touched: Vec<&str> = ready.iter().map(|(e, _)| e.path.as_str()).collect();
    registry.record_and_mirror(at.top, at.common, &changed, &touched)?;
    Ok(Done {
        promoted,
        recorded: changed.len(),
        unvouched,
    })
}

/// The content oid `entry`'s pointer may be promoted to, `said` being the
/// registry's: `said` when members' word is taken, or when the source's
/// ETag is a checksum of the content ([`disagrees`] then checks the bytes
/// against it); else the oid this node's own fetch of the object gave,
/// and `None` when it has not fetched it yet.
fn vouched(
    registry: &Registry,
    entry: &Entry,
    said: Oid,
    word: MembersWord,
) -> Result<Option<Oid>, ForeignError> {
    if word == MembersWord::Taken || content_md5(entry).is_some() {
        return Ok(Some(said));
    }
    let object = &entry.object;
    Ok(registry.hashed_here(&object.provisional_oid, object.size)?)
}

/// The oid `entry`'s pointer holds when it is promoted already, `said`
/// being the registry's content oid: `said`, or, on a node that takes no
/// member's word, the oid its own fetch gave (which may differ from a
/// member's lie); `None` while it is still to be promoted.
fn settled(
    registry: &Registry,
    entry: &Entry,
    said: Oid,
    word: MembersWord,
) -> Result<Option<Oid>, ForeignError> {
    if entry.oid == said {
        return Ok(Some(said));
    }
    if word == MembersWord::Taken {
        return Ok(None);
    }
    let object = &entry.object;
    let own = registry.hashed_here(&object.provisional_oid, object.size)?;
    Ok(own.filter(|own| *own == entry.oid))
}

/// The MD5 of the content `entry`'s pointer names, when its provisional oid
/// is the sha256 of an ETag that is the MD5 of the content (a single-part
/// S3 upload). The ETag's text, the registry's, is only believed when it
/// gives the pointer's very oid (no one can make another ETag give it).
fn content_md5(entry: &Entry) -> Option<&str> {
    let etag = entry.object.etag.trim_matches('"');
    let content_etag = crate::stores::is_content_etag(etag) && !etag.contains('-');
    // A content ETag's provisional oid is its sha256 alone, whatever the URL.
    (content_etag && crate::registry::provisional_oid("", etag) == entry.oid).then_some(etag)
}

/// Whether git-lfs can have pool object `oid` (of `size` bytes) in the
/// repo whose LFS folder is `lfs`: false when the pool lacks it. A large
/// object is linked into `.git/lfs/objects` (a link, no bytes copied), so
/// git-lfs checks it out with no transfer. A small one stays in the pool's
/// small-object tier alone: writing it out would cost a file and, mostly, a
/// folder each (on ext4, new inodes were over half the daemon's time for
/// 1,000 objects of 4 KiB), and nothing needs it there: git-lfs gets it
/// through the agent when it checks the path out, and the pre-push reads it
/// from the pool.
fn reachable(pool: &Pool, lfs: &Path, oid: &Oid, size: u64) -> Result<bool, PoolError> {
    match pool.tier_for(size) {
        Tier::Kv => Ok(pool.size(oid)? == Some(size)),
        Tier::Large => Ok(hydrate(pool, lfs, oid, size)? != Hydrated::NotInPool),
    }
}

/// Why the pool's bytes of `to` are not the object `entry` points at, by
/// this user's own record of the source; `None` when nothing says so.
///
/// A content oid in the registry is a claim (in team mode any member may
/// write it). What the repo's own pointer says is this user's: its size,
/// and its provisional oid, which is `sha256` of the source's ETag when
/// that ETag is an MD5 of the content (a single-part S3 upload): then the
/// bytes' MD5 must give that very oid ([`content_md5`]). An ETag that
/// derives from no content (nginx's mtime-size, a multipart upload's) can
/// prove nothing: README "For a lab" says what the lab then trusts, and
/// [`vouched`] what a node that trusts no member's word takes.
fn disagrees(pool: &Pool, entry: &Entry, to: &Oid) -> Result<Option<String>, PoolError> {
    let size = entry.object.size;
    match pool.size(to)? {
        Some(held) if held != size => {
            return Ok(Some(format!(
                "the pool's bytes are {held} bytes, the pointer says {size}"
            )))
        }
        None => return Ok(None), // nothing to compare: not hydrated either
        Some(_) => {}
    }
    let Some(etag) = content_md5(entry) else {
        return Ok(None);
    };
    let Some(blob) = pool.get_verified(to)? else {
        return Ok(None);
    };
    let got = crate::remote::digest::md5_hex(&blob)?;
    if got.eq_ignore_ascii_case(etag) {
        return Ok(None);
    }
    Ok(Some(format!(
        "the pool's bytes have MD5 {got}, the source's ETag (its MD5) was {etag}"
    )))
}

/// Whether [`reachable`] puts an object of `size` bytes in `.git/lfs/objects`.
fn linked_into_repo(pool: &Pool, size: u64) -> bool {
    pool.tier_for(size) == Tier::Large
}

fn rewrite(e: &Entry, to: Oid) -> Rewrite {
    let size = e.object.size;
    Rewrite {
        path: e.path.clone(),
        from: Pointer { oid: e.oid, size },
        to: Pointer { oid: to, size },
    }
}

impl ForeignObjects {
    /// After a worker hashed `object` to `oid`: in `repo`, the bytes into
    /// `.git/lfs/objects` and its uncommitted pointers promoted; the
    /// mirror learns the content oid either way.
    ///
    /// Promotions are batched per repo: the object joins the repo's pending
    /// list, and the caller that found the list empty drains it, one batch
    /// (one pass of git, one mirror write) at a time, until it stays empty.
    /// The other callers return at once. So with many small objects
    /// finishing together, the repo is rewritten once per batch, not once
    /// per object (which costs several git processes and a full mirror
    /// write each, and grows with the repo).
    pub async fn promote_hashed(&self, repo: &Path, object: &ForeignObject, oid: Oid) {
        let hashed = HashedObject {
            provisional: object.provisional_oid,
            size: object.size,
            content: oid,
        };
        if !self.pending.join(repo, hashed) {
            return; // Its batch is drained by the caller that came first.
        }
        loop {
            let _writing = self.repo_locks.lock(repo).await;
            // Taken under the repo's lock: what arrives meanwhile waits for
            // the next batch, which this loop takes too.
            let Some(batch) = self.pending.take(repo) else {
                return;
            };
            self.promote_batch(repo, batch).await;
        }
    }

    /// One batch of hashed objects promoted in `repo` (the caller holds
    /// the repo's lock).
    async fn promote_batch(&self, repo: &Path, batch: Vec<HashedObject>) {
        let (pool, registry) = (self.pool.clone(), self.registry.clone());
        let top = repo.to_path_buf();
        let objects = batch.len();
        let word = self.members_word();
        let outcome = crate::blocking(move || {
            let common = Repo::locate(&top)?.common_dir;
            // A provisional oid names one ETag (scoped by the URL unless the
            // ETag is an md5 of the content), so with the size it names the
            // content: every pointer carrying it becomes its content oid.
            let content: HashMap<(Oid, u64), Oid> = batch
                .into_iter()
                .map(|h| ((h.provisional, h.size), h.content))
                .collect();
            let targets = registry
                .provisional_for_repo(&top)?
                .into_iter()
                .filter_map(|e| {
                    let to = *content.get(&(e.oid, e.object.size))?;
                    Some((e, to))
                })
                .collect();
            let at = RepoAt {
                top: &top,
                common: &common,
            };
            promote_to_content(&pool, &registry, at, targets, Trigger::Hashed, word)
        })
        .await;
        let shown = repo.display();
        match outcome {
            Ok(done) if done.recorded > 0 => {
                log::info!(
                    "{shown}: {} staged pointer(s) promoted, for {objects} hashed object(s)",
                    done.recorded
                );
                self.refresh_index_soon(repo);
            }
            Ok(_) => {}
            Err(e) => log::warn!("{shown}: after hashing {objects} object(s): {e}"),
        }
    }

    /// For a repo whose foreign objects were hashed while the workers could
    /// not reach it: a daemon killed between recording a hash and promoting,
    /// a daemon state wiped and restored from the repo's mirror, a repo
    /// registered late. Large objects the repo lacks in `.git/lfs/objects`,
    /// or objects whose pointers still carry the provisional oid, are dealt with now,
    /// as the workers would have. Run when a repo is registered and at start.
    pub async fn catch_up(&self, repo: &Path) {
        let (pool, registry) = (self.pool.clone(), self.registry.clone());
        let top = repo.to_path_buf();
        let word = self.members_word();
        let _writing = self.repo_locks.lock(repo).await;
        let outcome = crate::blocking(move || {
            let common = Repo::locate(&top)?.common_dir;
            let objects = common.join("lfs").join("objects");
            let mut targets: Vec<(Entry, Oid)> = Vec::new();
            for e in registry.for_repo(&top)? {
                let Some(said) = e.object.content_oid else {
                    continue;
                };
                let due = match settled(&registry, &e, said, word)? {
                    None => true,
                    Some(oid) => {
                        linked_into_repo(&pool, e.object.size)
                            && !object_path(&objects, &oid).is_file()
                    }
                };
                if due {
                    targets.push((e, said));
                }
            }
            if targets.is_empty() {
                return Ok((0, Done::default()));
            }
            let objects = distinct_objects(&targets);
            let at = RepoAt {
                top: &top,
                common: &common,
            };
            let done = promote_to_content(&pool, &registry, at, targets, Trigger::Hashed, word)?;
            Ok::<_, ForeignError>((objects, done))
        })
        .await;
        let shown = repo.display();
        match outcome {
            Ok((n, done)) => {
                // Objects this node is still to fetch itself are not news.
                if n > 0 && (done.recorded > 0 || done.unvouched.is_empty()) {
                    log::info!(
                        "{shown}: caught up with {n} hashed object(s), {} staged pointer(s) promoted",
                        done.recorded
                    );
                }
                self.fetch_here(done.unvouched);
            }
            Err(e) => log::warn!("{shown}: catching up with hashed objects: {e}"),
        }
    }

    /// Whether another member's hash is taken here (`team_trust_members`).
    fn members_word(&self) -> MembersWord {
        match self.own {
            Some(_) => MembersWord::Refused,
            None => MembersWord::Taken,
        }
    }

    /// Starts this node's own fetch of the entries' objects (those
    /// [`vouched`] left waiting for it); the promotion follows at the next
    /// catch-up, once their hash is this node's.
    fn fetch_here(&self, unvouched: Vec<Entry>) {
        if let (Some(own), false) = (&self.own, unvouched.is_empty()) {
            own.start(unvouched);
        }
    }

    /// Team mode: another node hashed objects `repo`'s pointers still name
    /// provisionally (its worker promoted its own repos only); they are
    /// promoted here, from the shared pool, as [`Self::catch_up`] does.
    /// One registry read when there is nothing to do.
    pub async fn catch_up_if_hashed_elsewhere(&self, repo: &Path) {
        let (registry, top) = (self.registry.clone(), repo.to_path_buf());
        let waiting = crate::blocking(move || registry.provisional_for_repo(&top)).await;
        match waiting {
            Ok(entries) if entries.iter().any(|e| e.object.content_oid.is_some()) => {
                self.catch_up(repo).await
            }
            Ok(_) => {}
            Err(e) => log::warn!(
                "{}: looking for objects hashed elsewhere: {e}",
                repo.display()
            ),
        }
    }

    /// `drsctl promote`: the named (or all) provisional pointers of the repo
    /// containing `cwd` whose object was hashed become content pointers;
    /// those whose object is not hashed yet are reported waiting. With
    /// `retry`, their jobs that failed for good are queued again first.
    /// Refreshes `repo`'s index a second after now (see
    /// [`crate::lfs::track::refresh_index`]), under the repo's lock, so the
    /// first `git status` after a promotion is as fast as the second. One
    /// wait per repo at a time: promotions meanwhile ride on it, and one
    /// after it started asks again.
    pub(super) fn refresh_index_soon(&self, repo: &Path) {
        if !self.refresh.ask(repo) {
            return;
        }
        let (refresh, locks, top) = (
            self.refresh.clone(),
            self.repo_locks.clone(),
            repo.to_path_buf(),
        );
        tokio::spawn(async move {
            // Past the second the promoted files were written in: git's
            // racy check compares whole seconds.
            tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
            refresh.taken(&top);
            let _writing = locks.lock(&top).await;
            let at = top.clone();
            if let Err(e) = crate::blocking(move || crate::lfs::track::refresh_index(&at)).await {
                log::warn!(
                    "{}: refreshing the index after a promotion: {e}",
                    top.display()
                );
            }
        });
    }

    pub async fn promote_asked(
        &self,
        request: PromoteRequest,
    ) -> Result<PromoteOutcome, ForeignError> {
        let cwd = request.cwd.clone();
        let top = crate::blocking(move || Repo::locate(&cwd).map(|repo| repo.top))
            .await
            .map_err(ForeignError::NotInRepo)?;
        // The workers promote the same pointers on their own: one writer at
        // a time, and what they promoted first is then found done, not changed.
        let _writing = self.repo_locks.lock(&top).await;
        let (pool, registry) = (self.pool.clone(), self.registry.clone());
        let word = self.members_word();
        let (outcome, retried, unvouched) =
            crate::blocking(move || promote_named(&pool, &registry, top, request, word)).await?;
        self.fetch_here(unvouched);
        if retried > 0 {
            log::info!("{retried} failed prefetch job(s) queued again");
            self.wake_workers();
        }
        if !outcome.rewritten.is_empty() {
            self.refresh_index_soon(&outcome.repo);
        }
        Ok(outcome)
    }
}

/// How many objects (by content oid) `targets` name.
fn distinct_objects(targets: &[(Entry, Oid)]) -> usize {
    let mut oids: Vec<Oid> = targets.iter().map(|(_, oid)| *oid).collect();
    oids.sort();
    oids.dedup();
    oids.len()
}

/// The blocking part of [`ForeignObjects::promote_asked`]; returns the
/// outcome, how many failed jobs were queued again, and the entries whose
/// object this node must hash itself first ([`vouched`]).
fn promote_named(
    pool: &Pool,
    registry: &Registry,
    top: PathBuf,
    request: PromoteRequest,
    word: MembersWord,
) -> Result<(PromoteOutcome, usize, Vec<Entry>), ForeignError> {
    let entries = provisional_entries(registry, &top, &request.cwd, &request.paths, request.all)?;
    let retried = match request.retry {
        true => retry_failed(registry, &entries)?,
        false => 0,
    };
    let mut outcome = PromoteOutcome {
        repo: top.clone(),
        ..PromoteOutcome::default()
    };
    let mut targets = Vec::new();
    for e in entries {
        match e.object.content_oid {
            Some(content) => targets.push((e, content)),
            None => outcome
                .waiting
                .push(super::standing::waiting(registry, &e)?),
        }
    }
    let common = Repo::locate(&top)?.common_dir;
    let at = RepoAt {
        top: &top,
        common: &common,
    };
    let done = promote_to_content(pool, registry, at, targets, Trigger::Asked, word)?;
    outcome.rewritten = done.promoted.rewritten;
    outcome.changed = done.promoted.changed;
    Ok((outcome, retried, done.unvouched))
}

/// Queues again the failed jobs of the entries' unhashed objects.
fn retry_failed(registry: &Registry, entries: &[Entry]) -> Result<usize, ForeignError> {
    let oids: Vec<Oid> = entries
        .iter()
        .filter(|e| e.object.content_oid.is_none())
        .map(|e| e.object.provisional_oid)
        .collect();
    Ok(registry.retry_failed(&oids)?)
}

/// The repo's provisional entries ([`Entry::is_provisional`]) at `paths`
/// (relative to the client's `cwd`), or all of them. A path that names no
/// entry (a typo, a file not added by URL) is refused, naming it: it must
/// not read as "nothing to do". Only the paths named are looked up, and
/// `all` asks SQLite for the provisional ones alone: the cost follows what
/// is asked, not how many pointers the repo holds.
pub(super) fn provisional_entries(
    registry: &Registry,
    top: &Path,
    cwd: &Path,
    paths: &[PathBuf],
    all: bool,
) -> Result<Vec<Entry>, ForeignError> {
    let named: Vec<String> = paths.iter().map(|p| relative(top, cwd, p)).collect();
    let asked: Vec<&str> = named.iter().map(String::as_str).collect();
    let found = registry.entries_at(top, &asked)?;
    if found.len() < asked.len() {
        let known: HashSet<&str> = found.iter().map(|e| e.path.as_str()).collect();
        if let Some(stray) = asked.iter().find(|n| !known.contains(**n)) {
            return Err(ForeignError::Refused(format!(
                "{stray} is not a pointer added by URL in {} (drsctl status lists the provisional ones)",
                top.display()
            )));
        }
    }
    if all {
        return Ok(registry.provisional_for_repo(top)?);
    }
    let mut entries: Vec<Entry> = found.into_iter().filter(Entry::is_provisional).collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    entries.dedup_by(|a, b| a.path == b.path);
    Ok(entries)
}

/// `path` (relative to `cwd`, or absolute) relative to the repo's top, `/`-separated.
pub(super) fn relative(top: &Path, cwd: &Path, path: &Path) -> String {
    let full = std::path::absolute(cwd.join(path)).unwrap_or_else(|_| cwd.join(path));
    full.strip_prefix(top)
        .unwrap_or(&full)
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}
