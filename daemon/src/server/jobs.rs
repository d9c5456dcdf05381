//! The prefetch workers: take due jobs from the registry's queue, fetch and
//! hash each object, record its content oid, then hydrate and promote in
//! every repo that refers to it. Failures are recorded with their reason
//! (redacted) and retried after a backoff, unless no retry can mend them
//! (`PrefetchError::max_tries`): those jobs are `failed` for good until the
//! user asks again (`drsctl promote --retry`). A job interrupted by a stop
//! or a kill is queued again at the next start and its download resumes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Shared;
use crate::ipc::JobProgress;
use crate::jobs::{backoff, prefetch, Hashed};
use crate::lfs::hydrate::object_path;
use crate::lfs::promote::{promote, Rewrite, Scope};
use crate::lfs::scan::git_dirs;
use crate::lfs::{hydrate, Hydrated, Pointer};
use crate::pool::{Oid, Pool};
use crate::registry::{mirror, now, ForeignObject, Job, Registry};
use crate::remote::{redact_text, FetchOptions};

/// How long an idle worker sleeps at most before looking at the queue again.
const IDLE: Duration = Duration::from_secs(5);

/// Downloads in progress, by URL (redacted): for `drsctl status`.
#[derive(Default)]
pub(crate) struct Running(Mutex<BTreeMap<String, (u64, u64, Instant)>>);

impl Running {
    pub fn report(&self) -> Vec<JobProgress> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .map(|(url, (done, total, since))| JobProgress {
                url: url.clone(),
                done: *done,
                total: *total,
                bytes_per_sec: (*done as f64 / since.elapsed().as_secs_f64().max(0.001)) as u64,
            })
            .collect()
    }

    fn set(&self, url: &str, done: u64, total: u64) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map
            .entry(url.to_string())
            .or_insert((0, total, Instant::now()));
        entry.0 = done;
    }

    fn clear(&self, url: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(url);
    }
}

/// Queues what the registry holds unhashed and wakes the workers: after an
/// add-url, and at start.
pub(crate) async fn queue_new(shared: &Shared) {
    let (registry, max) = (shared.registry.clone(), shared.config.prefetch.max_size);
    match tokio::task::spawn_blocking(move || registry.queue_unhashed(max)).await {
        Ok(Ok(_)) => shared.jobs_wake.notify_waiters(),
        Ok(Err(e)) => log::warn!("queueing prefetch jobs: {e}"),
        Err(e) => log::warn!("queueing prefetch jobs: {e}"),
    }
}

/// Runs the configured number of workers until the daemon stops.
pub(crate) async fn run(shared: Arc<Shared>) {
    let (registry, max) = (shared.registry.clone(), shared.config.prefetch.max_size);
    let requeued = move || {
        registry.release_held(max)?;
        registry.requeue_running()
    };
    match tokio::task::spawn_blocking(requeued).await {
        Ok(Ok(n)) if n > 0 => log::info!("{n} interrupted prefetch job(s) queued again"),
        Ok(Err(e)) => log::warn!("requeueing interrupted jobs: {e}"),
        _ => {}
    }
    queue_new(&shared).await;
    let workers = (0..shared.config.prefetch.jobs).map(|_| worker(shared.clone()));
    futures_util::future::join_all(workers).await;
}

async fn worker(shared: Arc<Shared>) {
    loop {
        let registry = shared.registry.clone();
        let claimed = tokio::task::spawn_blocking(move || registry.claim(now())).await;
        match claimed {
            Ok(Ok(Some(job))) => work(&shared, job).await,
            Ok(Ok(None)) => {
                let wait = idle_wait(&shared.registry).await;
                tokio::select! {
                    _ = shared.jobs_wake.notified() => {}
                    _ = tokio::time::sleep(wait) => {}
                    _ = shared.stop.cancelled() => return,
                }
            }
            Ok(Err(e)) => {
                log::warn!("taking a prefetch job: {e}");
                tokio::time::sleep(IDLE).await;
            }
            Err(e) => log::warn!("taking a prefetch job: {e}"),
        }
        if shared.stop.is_cancelled() {
            return;
        }
    }
}

/// Until the next failed job is due, at most [`IDLE`].
async fn idle_wait(registry: &Arc<Registry>) -> Duration {
    let registry = registry.clone();
    let due = tokio::task::spawn_blocking(move || registry.next_due()).await;
    match due {
        Ok(Ok(Some(at))) => {
            Duration::from_secs(at.saturating_sub(now())).clamp(Duration::from_millis(200), IDLE)
        }
        _ => IDLE,
    }
}

async fn work(shared: &Arc<Shared>, job: Job) {
    let cfg = &shared.config.prefetch;
    let shown = job.object.url.to_string();
    let opts = FetchOptions {
        bandwidth: cfg.bandwidth.map(|b| (b / cfg.jobs as u64).max(1)),
        ..FetchOptions::default()
    };
    let size = job.object.size;
    let report = |done| shared.running.set(&shown, done, size);
    let outcome = tokio::select! {
        outcome = prefetch(shared.pool.clone(), &shared.remote, &job.object, opts, cfg.part_size, &report) => Some(outcome),
        // Stopping: the job stays `running` and is queued again at the next start.
        _ = shared.stop.cancelled() => None,
    };
    shared.running.clear(&shown);
    let registry = shared.registry.clone();
    match outcome {
        None => {}
        Some(Ok(Hashed { oid, md5 })) => {
            let md5 = hex::encode(md5);
            log::info!("prefetched {shown}: sha256 {oid}, md5 {md5}");
            let content = oid.to_hex();
            let done = {
                let job = job.clone();
                tokio::task::spawn_blocking(move || registry.job_done(&job, &content, Some(&md5)))
                    .await
            };
            match done {
                Ok(Ok(repos)) => {
                    for repo in repos {
                        after_hash(shared, &repo, &job.object, oid).await;
                    }
                }
                Ok(Err(e)) => log::warn!("recording the hash of {shown}: {e}"),
                Err(e) => log::warn!("recording the hash of {shown}: {e}"),
            }
        }
        Some(Err(e)) => {
            // Stored, shown by `drsctl status` and `promote`: no secret in it.
            let why = redact_text(&e.to_string());
            let tries = job.attempts + 1;
            let retry_at = match e.max_tries() {
                Some(max) if tries >= max => {
                    log::warn!(
                        "prefetch of {shown} failed (try {tries}), not tried again (drsctl promote --retry): {why}"
                    );
                    None
                }
                _ => {
                    let wait = backoff(cfg.retry, job.attempts);
                    log::warn!(
                        "prefetch of {shown} failed (try {tries}), again in {wait:?}: {why}"
                    );
                    Some(now() + wait.as_secs())
                }
            };
            let _ = tokio::task::spawn_blocking(move || registry.job_failed(&job, &why, retry_at))
                .await;
            super::partials::cap_failed(shared).await;
        }
    }
}

/// In `repo`: the object into `.git/lfs/objects`, its uncommitted pointers
/// rewritten to the content oid, the registry and the repo's mirror updated.
async fn after_hash(shared: &Shared, repo: &Path, object: &ForeignObject, oid: Oid) {
    let (pool, registry) = (shared.pool.clone(), shared.registry.clone());
    let (repo, object) = (repo.to_path_buf(), object.clone());
    let shown = repo.display().to_string();
    // Hydration, promotion and the mirror are writes in the repo: one
    // writer at a time (`drsctl promote` and add-url write the same files).
    let _writing = shared.repo_locks.lock(&repo).await;
    let outcome = tokio::task::spawn_blocking(move || {
        let common = git_dirs(&repo).map_err(|e| e.to_string())?.common_dir;
        let promoted = settle(
            &pool,
            &registry,
            &repo,
            &common,
            &BTreeMap::from([(object.provisional_oid.clone(), (oid, object))]),
        )?;
        write_mirror(&registry, &repo, &common)?;
        Ok::<_, String>(promoted)
    })
    .await;
    match outcome {
        Ok(Ok(n)) if n > 0 => log::info!("{shown}: {n} staged pointer(s) promoted to sha256 {oid}"),
        Ok(Ok(_)) => {}
        Ok(Err(e)) => log::warn!("{shown}: after hashing {oid}: {e}"),
        Err(e) => log::warn!("{shown}: after hashing {oid}: {e}"),
    }
}

/// For a repo whose foreign objects were hashed while the workers could not
/// reach it: a daemon killed between recording a hash and settling its
/// repos, a daemon state wiped and restored from the repo's mirror, a repo
/// registered late. Objects the repo lacks in `.git/lfs/objects`, or whose
/// pointers still carry the provisional oid, are settled now, as the
/// workers would have. Run when a repo is registered and at start.
pub(crate) async fn catch_up(shared: &Shared, repo: &Path) {
    let (pool, registry) = (shared.pool.clone(), shared.registry.clone());
    let at = repo.to_path_buf();
    let _writing = shared.repo_locks.lock(repo).await;
    let outcome = tokio::task::spawn_blocking(move || {
        let common = git_dirs(&at).map_err(|e| e.to_string())?.common_dir;
        let objects = common.join("lfs").join("objects");
        let mut todo = BTreeMap::new();
        for e in registry.for_repo(&at).map_err(|e| e.to_string())? {
            let content = e.object.content_oid.as_deref();
            let Some(oid) = content.and_then(|c| c.parse::<Oid>().ok()) else {
                continue;
            };
            let provisional = e.oid != oid.to_hex();
            if provisional || !object_path(&objects, &oid).is_file() {
                todo.entry(e.object.provisional_oid.clone())
                    .or_insert((oid, e.object));
            }
        }
        let promoted = settle(&pool, &registry, &at, &common, &todo)?;
        if !todo.is_empty() {
            write_mirror(&registry, &at, &common)?;
        }
        Ok::<_, String>((todo.len(), promoted))
    })
    .await;
    let shown = repo.display();
    match outcome {
        Ok(Ok((0, _))) => {}
        Ok(Ok((n, p))) => log::info!(
            "{shown}: caught up with {n} hashed object(s), {p} staged pointer(s) promoted"
        ),
        Ok(Err(e)) => log::warn!("{shown}: catching up with hashed objects: {e}"),
        Err(e) => log::warn!("{shown}: catching up with hashed objects: {e}"),
    }
}

/// Hydrates each object (by provisional oid: its content oid and what it
/// is) into the repo and promotes the repo's uncommitted pointers to it, in
/// one pass of git for all; returns how many pointers were rewritten. An
/// object the pool lacks is left alone: its pointer would name bytes this
/// machine cannot give.
fn settle(
    pool: &Pool,
    registry: &Registry,
    repo: &Path,
    common: &Path,
    objects: &BTreeMap<String, (Oid, ForeignObject)>,
) -> Result<usize, String> {
    let mut here = BTreeMap::new();
    for (provisional, (oid, object)) in objects {
        let placed =
            hydrate(pool, &common.join("lfs"), oid, object.size).map_err(|e| e.to_string())?;
        if placed != Hydrated::NotInPool {
            here.insert(provisional.clone(), (*oid, object));
        }
    }
    promote_in(registry, repo, &here)
}

fn write_mirror(registry: &Registry, repo: &Path, common: &Path) -> Result<(), String> {
    let listed = registry.for_repo(repo).map_err(|e| e.to_string())?;
    mirror::write(common, &listed).map_err(|e| e.to_string())
}

/// Rewrites the repo's uncommitted pointers to these objects (by their
/// provisional oid) and records their new oid; returns how many were
/// rewritten.
fn promote_in(
    registry: &Registry,
    repo: &Path,
    objects: &BTreeMap<String, (Oid, &ForeignObject)>,
) -> Result<usize, String> {
    // A provisional oid names one ETag (scoped by the URL unless the ETag
    // is an md5 of the content), so with the size it names the content.
    let mut entries: Vec<_> = registry
        .for_repo(repo)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|e| {
            objects
                .get(&e.oid)
                .is_some_and(|(_, o)| o.size == e.object.size)
        })
        .collect();
    let mut rewrites = Vec::new();
    for e in &entries {
        let (to, o) = objects[&e.oid];
        let Ok(from) = e.oid.parse::<Oid>() else {
            continue;
        };
        rewrites.push(Rewrite {
            path: e.path.clone(),
            from: Pointer {
                oid: from,
                size: o.size,
            },
            to: Pointer {
                oid: to,
                size: o.size,
            },
        });
    }
    if rewrites.is_empty() {
        return Ok(0);
    }
    let done = promote(repo, &rewrites, Scope::Uncommitted).map_err(|e| e.to_string())?;
    entries.retain(|e| done.rewritten.contains(&e.path));
    for e in &mut entries {
        e.oid = objects[&e.oid].0.to_hex();
    }
    registry.record(repo, &entries).map_err(|e| e.to_string())?;
    Ok(entries.len())
}
