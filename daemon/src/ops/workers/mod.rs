//! The prefetch workers: take due jobs from the registry's queue, fetch and
//! hash each object, record its content oid, then have the foreign-object
//! service hydrate and promote in every repo that refers to it. Failures
//! are recorded with their reason (redacted) and retried after a backoff,
//! unless no retry can mend them (`PrefetchError::max_tries`): those jobs
//! are `failed` for good until the user asks again (`drsctl promote
//! --retry`). A job interrupted by a stop or a kill is queued again at the
//! next start and its download resumes. What one worker does with a job
//! is `prefetch.rs`'s.

pub mod prefetch;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use self::prefetch::{failure_reason, next_try, prefetch, Hashed, NO_SPACE_REASON};
use super::foreign::ForeignObjects;
use crate::blocking;
use crate::config::PrefetchConfig;
use crate::pool::Pool;
use crate::registry::{now, Job, Registry};
use crate::remote::{FetchOptions, Remote};
use drsd_proto::{JobProgress, QueueReport, TeamReport};

/// How long `status` waits for a read of the queue or the team's nodes:
/// status answers at once, even when a team's database hangs (a lock held
/// on its tables, a server that stopped answering), and says so.
pub const STATUS_WAIT: Duration = Duration::from_secs(2);
/// How long an idle worker sleeps at most before looking at the queue again.
const IDLE: Duration = Duration::from_secs(5);
/// Times a job's outcome is written before the worker gives up on it.
const RECORD_TRIES: u32 = 10;

/// Downloads in progress, by URL (redacted): for `drsctl status`.
#[derive(Default)]
struct Running(Mutex<BTreeMap<String, (u64, u64, Instant)>>);

impl Running {
    fn report(&self) -> Vec<JobProgress> {
        let map = crate::lock::lock(&self.0);
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
        let mut map = crate::lock::lock(&self.0);
        let entry = map
            .entry(url.to_string())
            .or_insert((0, total, Instant::now()));
        entry.0 = done;
    }

    fn clear(&self, url: &str) {
        crate::lock::lock(&self.0).remove(url);
    }
}

/// The prefetch workers and what they share: the queue, the pool, the
/// object stores, the downloads in progress.
pub struct Workers {
    registry: Arc<Registry>,
    pool: Arc<Pool>,
    remote: Arc<Remote>,
    /// Hydrates and promotes a hashed object in the repos using it.
    foreign: Arc<ForeignObjects>,
    cfg: PrefetchConfig,
    /// Notified when jobs were queued.
    wake: Arc<Notify>,
    running: Running,
    /// Cancelled when the daemon stops.
    stop: CancellationToken,
}

impl Workers {
    pub(crate) fn new(
        registry: Arc<Registry>,
        pool: Arc<Pool>,
        remote: Arc<Remote>,
        foreign: Arc<ForeignObjects>,
        cfg: PrefetchConfig,
        wake: Arc<Notify>,
        stop: CancellationToken,
    ) -> Workers {
        Workers {
            registry,
            pool,
            remote,
            foreign,
            cfg,
            wake,
            running: Running::default(),
            stop,
        }
    }

    /// The job queue for `status`: counts per state, the open jobs (at most
    /// 100) and the downloads in progress. A queue that cannot be read
    /// within [`STATUS_WAIT`] shows empty: the rest of the status still
    /// helps.
    pub async fn queue(&self) -> QueueReport {
        let registry = self.registry.clone();
        let read = within_status_wait(blocking(move || {
            Ok::<_, crate::registry::RegistryError>((
                registry.job_counts()?,
                registry.open_jobs(100)?,
            ))
        }))
        .await;
        let (counts, open) = read.unwrap_or_else(|e| {
            log::warn!("reading the job queue: {e}");
            Default::default()
        });
        QueueReport {
            queued: counts.queued,
            running: counts.running,
            retrying: counts.retrying,
            failed: counts.failed,
            held: counts.held,
            done: counts.done,
            active: self.running.report(),
            open: open.into_iter().map(Into::into).collect(),
        }
    }

    /// This node's name, when the registry is a team's.
    pub fn team_name(&self) -> Option<String> {
        self.registry.team().map(|t| t.node)
    }

    /// The registry's engine, for `status`.
    pub fn registry_engine(&self) -> &'static str {
        self.registry.name()
    }

    /// The team and its nodes, when the registry is a team's. A database
    /// that does not answer within [`STATUS_WAIT`] (or fails the read) is
    /// shown unreachable, with why, and the list empty: status must answer
    /// even then.
    pub async fn team(&self) -> Option<Box<TeamReport>> {
        let registry = self.registry.clone();
        let view = registry.team()?;
        let (nodes, unreachable) =
            match within_status_wait(blocking(move || registry.team_nodes())).await {
                Ok(nodes) => (nodes, None),
                Err(e) => {
                    log::warn!("listing the team's nodes: {e}");
                    (Vec::new(), Some(e.to_string()))
                }
            };
        Some(Box::new(TeamReport {
            server: view.server,
            node: view.node,
            nodes,
            unreachable,
        }))
    }

    /// The registry, for the in-process tests.
    #[cfg(test)]
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Whether a prefetch runs or one is due within `limit`, for the idle
    /// timer. When the queue cannot be read, it says busy: better up than
    /// gone.
    pub async fn busy_within(&self, limit: Duration) -> bool {
        let registry = self.registry.clone();
        let queue = blocking(move || {
            Ok::<_, crate::registry::RegistryError>((
                registry.job_counts()?.running,
                registry.next_due()?,
            ))
        })
        .await;
        match queue {
            Ok((running, next)) => {
                running > 0
                    || next.is_some_and(|at| at <= now() + limit.as_secs_f64().ceil() as u64)
            }
            Err(_) => true,
        }
    }
}

/// Why a read for `status` gave nothing: its own error, or no answer in
/// time.
#[derive(Debug, thiserror::Error)]
enum StatusRead<E> {
    #[error(transparent)]
    Failed(E),
    #[error("no answer within {}s (a lock held on its tables, or the server hangs)", STATUS_WAIT.as_secs())]
    NoAnswer,
}

/// `read`'s outcome, or [`StatusRead::NoAnswer`] when it took longer than
/// [`STATUS_WAIT`] (the read goes on, off the async threads, until the
/// database's own bounds end it).
async fn within_status_wait<T, E>(
    read: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, StatusRead<E>> {
    match tokio::time::timeout(STATUS_WAIT, read).await {
        Ok(read) => read.map_err(StatusRead::Failed),
        Err(_) => Err(StatusRead::NoAnswer),
    }
}

/// Runs the configured number of workers until the daemon stops.
pub async fn run(shared: Arc<Workers>) {
    let (registry, max) = (shared.registry.clone(), shared.cfg.max_size);
    let requeued = move || {
        registry.release_held(max)?;
        // Those a full pool ended: room may have been made since.
        let full = registry.requeue_failed_for(NO_SPACE_REASON)?;
        Ok::<_, crate::registry::RegistryError>((registry.requeue_running()?, full))
    };
    match blocking(requeued).await {
        Ok((n, full)) => {
            if n > 0 {
                log::info!("{n} interrupted prefetch job(s) queued again");
            }
            if full > 0 {
                log::info!("{full} prefetch job(s) a full pool ended queued again");
            }
        }
        Err(e) => log::warn!("requeueing interrupted jobs: {e}"),
    }
    shared.foreign.queue_unhashed().await;
    let cfg = &shared.cfg;
    let small = shared.pool.threshold().saturating_sub(1);
    let lanes =
        std::iter::repeat_n(u64::MAX, cfg.jobs).chain(std::iter::repeat_n(small, cfg.small_jobs));
    let workers = lanes.map(|max_size| worker(shared.clone(), max_size));
    futures_util::future::join_all(workers).await;
}

/// Takes jobs of objects up to `max_size` bytes: the configured few
/// workers take any (a large object is worth a bandwidth-friendly few
/// streams), the small-object lane's many take those that go to the pool's
/// kv tier, in one GET each, whose time is round trips, not bandwidth.
async fn worker(shared: Arc<Workers>, max_size: u64) {
    loop {
        let registry = shared.registry.clone();
        match blocking(move || registry.claim_up_to(now(), max_size)).await {
            Ok(Some(job)) => work(&shared, job).await,
            Ok(None) => {
                let wait = idle_wait(&shared.registry, max_size).await;
                tokio::select! {
                    _ = shared.wake.notified() => {}
                    _ = tokio::time::sleep(wait) => {}
                    _ = shared.stop.cancelled() => return,
                }
            }
            Err(e) => {
                log::warn!("taking a prefetch job: {e}");
                tokio::time::sleep(IDLE).await;
            }
        }
        if shared.stop.is_cancelled() {
            return;
        }
    }
}

/// Until the next job of at most `max_size` bytes is due, at most
/// [`IDLE`].
async fn idle_wait(registry: &Arc<Registry>, max_size: u64) -> Duration {
    let registry = registry.clone();
    match blocking(move || registry.next_due_up_to(max_size)).await {
        Ok(Some(at)) => {
            Duration::from_secs(at.saturating_sub(now())).clamp(Duration::from_millis(200), IDLE)
        }
        _ => IDLE,
    }
}

/// Fetches and hashes the job's object, then records how it went.
async fn work(shared: &Workers, job: Job) {
    let cfg = &shared.cfg;
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
        // Cut off from the team's database past the lease: another node
        // may own the job now; downloading on would fetch it twice.
        _ = lapsed(&shared.registry) => {
            log::warn!(
                "prefetch of {shown} abandoned: this node's claims lapsed (the team \
                 database is out of reach), so another node may take the job over"
            );
            // Given back once the database answers, unless taken by then:
            // else this node's next renewal would hold it for good.
            let (registry, job) = (shared.registry.clone(), job.clone());
            if let Err(e) = recorded(shared, move || registry.release_claim(&job)).await {
                log::warn!("giving back the job of {shown}: {e}");
            }
            None
        }
    };
    shared.running.clear(&shown);
    match outcome {
        None => {}
        Some(Ok(hashed)) => finish(shared, job, hashed, &shown).await,
        Some(Err(e)) => {
            // Stored, shown by `drsctl status` and `promote`: no secret in it.
            let why = failure_reason(&e, shared.pool.dir());
            let tries = job.attempts + 1;
            let retry_at = next_try(&e, tries, cfg.retry);
            match retry_at {
                None => log::warn!(
                    "prefetch of {shown} failed (try {tries}), not tried again (drsctl promote --retry): {why}"
                ),
                Some(at) => log::warn!(
                    "prefetch of {shown} failed (try {tries}), again in {}s: {why}",
                    at.saturating_sub(now())
                ),
            }
            let registry = shared.registry.clone();
            let failed = recorded(shared, move || registry.job_failed(&job, &why, retry_at)).await;
            if let Err(e) = failed {
                log::warn!("recording the failure of {shown}: {e}");
            }
            if let Some(dir) = shared.pool.partial_dir() {
                let (registry, max) = (shared.registry.clone(), cfg.partial_max);
                super::gc::partials::cap_failed(registry, dir.to_path_buf(), max).await;
            }
        }
    }
}

/// The job's object is hashed: its content oid recorded, then promoted in
/// every repo that refers to it.
async fn finish(shared: &Workers, job: Job, hashed: Hashed, shown: &str) {
    let Hashed {
        oid,
        md5,
        unverified,
    } = hashed;
    let md5 = md5.map(hex::encode);
    log::info!("prefetched {shown}: sha256 {oid}");
    let registry = shared.registry.clone();
    let done = {
        let job = job.clone();
        recorded(shared, move || {
            registry.job_done(&job, &oid, md5.as_deref(), unverified.as_deref())
        })
        .await
    };
    match done {
        Ok(repos) => {
            for repo in repos {
                shared.foreign.promote_hashed(&repo, &job.object, oid).await;
            }
        }
        Err(e) => log::warn!("recording the hash of {shown}: {e}"),
    }
}

/// Tries recording a job's outcome again while the registry fails:
/// [`RECORD_TRIES`] times, and for as long as the daemon runs while the
/// failure is a team database out of reach (its calls wait out the start of
/// an outage, then fail at once). Unrecorded, the job stays `running` under
/// this node's lease, which the node renews, so no other node would take
/// it.
async fn recorded<T: Send + 'static>(
    shared: &Workers,
    write: impl Fn() -> Result<T, crate::registry::RegistryError> + Send + Sync + 'static,
) -> Result<T, crate::registry::RegistryError> {
    let write = Arc::new(write);
    let mut tries = 1;
    loop {
        let once = write.clone();
        match blocking(move || once()).await {
            Err(e) if (tries < RECORD_TRIES || e.unreachable()) && !shared.stop.is_cancelled() => {
                if tries < RECORD_TRIES {
                    log::warn!("recording a prefetch's outcome (try {tries}): {e}; trying again");
                }
                tries += 1;
                tokio::time::sleep(IDLE).await;
            }
            other => return other,
        }
    }
}

/// Resolves once this node's claims lapsed (checked every second).
async fn lapsed(registry: &Registry) {
    while !registry.claims_lapsed() {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
