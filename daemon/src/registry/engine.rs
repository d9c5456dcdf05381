//! The registry's engine: the interface every service reaches the registry's
//! records through, as the pool's engines are reached through
//! [`Backend`](crate::pool::Backend).
//!
//! # Design note
//!
//! **What an engine owns.** The records a daemon keeps besides the pool's
//! bytes, one small trait per room: [`ForeignObjects`] (objects added by
//! URL and the repos' paths pointing at them), [`JobQueue`] (the prefetch
//! jobs), [`OpenUploads`] (multipart uploads begun and not ended),
//! [`SentRecords`] (what an object remote was shown to hold),
//! and [`IndexdRecords`] (registrations with an Indexd). [`RegistryEngine`]
//! is all five; the one engine today is SQLite ([`SqliteRegistry`], a file
//! in the state folder). What is not the engine's stays in
//! [`Registry`](super::Registry): the per-repo mirrors (files in each repo,
//! rewritten after the engine committed). The pool's pins and gc's grace
//! records have traits of their own beside the pool
//! ([`PinTable`](crate::pool::PinTable),
//! [`GcRecords`](crate::pool::GcRecords)), held to the same contract suite.
//!
//! **Atomicity.** Each method is one transaction: it happens whole or not at
//! all, and what it returns was true when it committed. Three of them are
//! where two writers meet and must stay single operations in every engine
//! (a second engine may not split them into a read and a write):
//! - [`JobQueue::claim_up_to`]: choosing the due job and marking it running.
//!   Two claimers (two workers, or two machines sharing a database) never
//!   get the same job. A shared engine does it with
//!   `SELECT … FOR UPDATE SKIP LOCKED` and a lease it renews itself while
//!   the job is open; the lease is the engine's business, no service sees it.
//! - [`JobQueue::job_done`]: the object's content oid and the job's end
//!   together, so no kill leaves a hashed object with an open job, or a done
//!   job without its content oid. Safe to repeat: whoever hashed the bytes,
//!   the content oid is the same.
//! - [`ForeignObjects::set_content_oid`] (the promotion of an object): the
//!   content oid and the list of repos to promote, read in the same
//!   transaction, so a repo recorded concurrently is either in the list or
//!   sees the content oid when it records.
//!
//! [`JobQueue::requeue_running`] is the start of a daemon: it puts back the
//! jobs *this* daemon's last run left running. For SQLite that is every
//! running job (one daemon per registry); a shared engine puts back its own
//! node's claims and any whose lease lapsed, never another live node's.
//!
//! **Sync.** The methods block, as the registry always has: services call
//! them off the async threads (`crate::blocking`).
//!
//! **A second engine** (PostgreSQL, issue 31) implements the five traits in
//! its own module (its own schema; [`super::schema`] is SQLite's), and joins
//! the contract suite (`registry/tests.rs`) by adding one fixture function
//! and one line to `for_every_engine!`: every case then runs against it too.
//! No service changes: services hold a [`Registry`](super::Registry), built
//! over any engine by [`Registry::with_engine`](super::Registry::with_engine).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{
    Entry, ForeignObject, IndexdRegistration, Job, JobCounts, JobState, OpenJob, RegistryError,
};
use crate::pool::Oid;
use crate::stores::{MultipartUpload, SentObject};

pub use super::postgres::PgRegistry;
pub use super::sqlite::SqliteRegistry;

type Result<T, E = RegistryError> = std::result::Result<T, E>;

/// Every room of the registry's records, behind one engine.
pub trait RegistryEngine:
    ForeignObjects + JobQueue + OpenUploads + SentRecords + IndexdRecords + Send + Sync + 'static
{
    /// The engine's name, as `status` may show it.
    fn name(&self) -> &'static str;

    /// The team whose shared records these are, if any (a shared engine).
    fn team(&self) -> Option<TeamView> {
        None
    }

    /// Whether this node's claims may have lapsed: its leases were not
    /// renewed for a lease's length (the team database out of reach), so
    /// another node may have taken its running jobs over. Never without a
    /// team.
    fn claims_lapsed(&self) -> bool {
        false
    }

    /// The team's nodes, most recently seen first; none without a team.
    fn team_nodes(&self) -> Result<Vec<drsd_proto::TeamNode>> {
        Ok(Vec::new())
    }

    /// Removes node `name` from the team's list of nodes; whether it was
    /// listed. A node still running lists itself again at its next
    /// heartbeat. Never listed without a team.
    fn forget_team_node(&self, _name: &str) -> Result<bool> {
        Ok(false)
    }

    /// The content oid this node's own fetch hashed the object of
    /// `provisional` oid and `size` to, when a shared engine's content oids
    /// may be another node's word; `None` too on one machine, where every
    /// content oid is this daemon's own.
    fn hashed_here(&self, _provisional: &Oid, _size: u64) -> Result<Option<Oid>> {
        Ok(None)
    }

    /// Records that this node's own fetch hashed that object to `content`
    /// (kept private to the node); nothing on one machine.
    fn record_hashed_here(&self, _provisional: &Oid, _size: u64, _content: &Oid) -> Result<()> {
        Ok(())
    }
}

/// Which team a shared engine serves, as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamView {
    /// The server, never its password.
    pub server: String,
    /// This daemon's node name.
    pub node: String,
}

/// Foreign objects (remote objects added by URL) and, per repo, which paths
/// point at which object. An object is known by its location: URL, ETag
/// and size.
pub trait ForeignObjects {
    /// Records `entries` of `repo` in one transaction: each object (a known
    /// one keeps its content oid when the entry has none, and the earliest
    /// `recorded_at`) and each path (replacing what the path pointed at).
    fn record(&self, repo: &Path, entries: &[Entry]) -> Result<()>;
    /// Puts back what a repo's mirror lists and the registry lacks; a path
    /// the registry has already wins. Returns how many paths were restored.
    fn restore(&self, repo: &Path, entries: &[Entry]) -> Result<usize>;
    /// The object at `url` with this ETag and size, if recorded.
    fn lookup_by_location(&self, url: &str, etag: &str, size: u64)
        -> Result<Option<ForeignObject>>;
    /// The objects known to hold content `oid`, newest first.
    fn objects_of_content(&self, oid: &Oid) -> Result<Vec<ForeignObject>>;
    /// Records the content oid of the object at this location; returns the
    /// repos referring to it (their mirrors need a rewrite). Atomic (see
    /// the module's design note).
    fn set_content_oid(
        &self,
        url: &str,
        etag: &str,
        size: u64,
        content_oid: &Oid,
    ) -> Result<Vec<PathBuf>>;
    /// Every path of `repo` that points at a foreign object, by path.
    fn for_repo(&self, repo: &Path) -> Result<Vec<Entry>>;
    /// The entries of `repo` at `paths` (those it has), in that order.
    fn entries_at(&self, repo: &Path, paths: &[&str]) -> Result<Vec<Entry>>;
    /// The entries of `repo` whose pointer is provisional
    /// ([`Entry::is_provisional`]), by path, chosen by the engine.
    fn provisional_for_repo(&self, repo: &Path) -> Result<Vec<Entry>>;
    /// Provisional oid -> content oid, for every object hashed so far.
    fn hashed(&self) -> Result<HashMap<Oid, Oid>>;
    /// How many objects are recorded, and how many have a content oid.
    fn counts(&self) -> Result<(u64, u64)>;
}

/// The prefetch queue: one job per foreign object whose content is not read
/// yet (see `queue.rs` for the states). Times are seconds since the epoch.
pub trait JobQueue {
    /// Queues a job for every object without a content oid read here and
    /// without a job; objects larger than `max_size` are held. Returns how
    /// many were queued. Idempotent.
    fn queue_unhashed(&self, max_size: Option<u64>) -> Result<usize>;
    /// The objects with these provisional (or content) oids are not to be
    /// prefetched: their jobs are `skipped`, unless done.
    fn skip(&self, provisional_oids: &[Oid]) -> Result<()>;
    /// Tries made outside the queue that failed, by provisional oid, with
    /// why and when to try again (`None`: failed for good). A running or
    /// done job is left alone.
    fn tried(&self, failures: &[(Oid, String, Option<u64>)]) -> Result<()>;
    /// The state of the job of the object at this location, and the reason
    /// of its last failure, if it has a job.
    fn job_state(
        &self,
        url: &str,
        etag: &str,
        size: u64,
    ) -> Result<Option<(JobState, Option<String>)>>;
    /// Queues held jobs that `max_size` no longer holds; returns how many.
    fn release_held(&self, max_size: Option<u64>) -> Result<usize>;
    /// Queues again, as new, the jobs in one of the states `from` of the
    /// unhashed objects with these provisional oids; returns how many.
    fn queue_again(&self, provisional_oids: &[Oid], from: &[JobState]) -> Result<usize>;
    /// Queues again, as new, the `failed` jobs whose reason starts with
    /// `reason`; returns how many.
    fn requeue_failed_for(&self, reason: &str) -> Result<usize>;
    /// Puts back in the queue the jobs this daemon's last run left running
    /// (see the module's design note for a shared engine).
    fn requeue_running(&self) -> Result<usize>;
    /// Gives back a job this node still holds but stopped working on (its
    /// claim lapsed while it was cut off): queued again, as new, unless
    /// another node claimed it since or it is done. Only a shared engine's
    /// claims lapse.
    fn release_claim(&self, job: &Job) -> Result<()> {
        let _ = job;
        Ok(())
    }
    /// Takes the job due first among objects of at most `max_size` bytes, if
    /// any is due by `at`, and marks it running. Atomic: no two claimers get
    /// the same job.
    fn claim_up_to(&self, at: u64, max_size: u64) -> Result<Option<Job>>;
    /// The job's object is hashed and stored: its content oid (and md5) and
    /// the job's end, with `note` when its ETag could not be verified, in
    /// one transaction. Returns the repos referring to the object.
    fn job_done(
        &self,
        job: &Job,
        content_oid: &Oid,
        md5: Option<&str>,
        note: Option<&str>,
    ) -> Result<Vec<PathBuf>>;
    /// The job failed with `why`: `retrying` at `retry_at`, or `failed` for
    /// good with none. Counts one attempt more.
    fn job_failed(&self, job: &Job, why: &str, retry_at: Option<u64>) -> Result<()>;
    /// When the next waiting job is due, if any waits.
    fn next_due(&self) -> Result<Option<u64>> {
        self.next_due_up_to(u64::MAX)
    }
    /// When the next waiting job of an object of at most `max_size` bytes
    /// is due: what a worker taking only those waits for (a lane of small
    /// objects must not wake for a large object it will not take).
    fn next_due_up_to(&self, max_size: u64) -> Result<Option<u64>>;
    fn job_counts(&self) -> Result<JobCounts>;
    /// Jobs not done, then done ones with a note (at most `limit`).
    fn open_jobs(&self, limit: usize) -> Result<Vec<OpenJob>>;
    /// The objects of the jobs in any of `states` (which partial downloads
    /// a job may still resume).
    fn job_objects(&self, states: &[JobState]) -> Result<Vec<ForeignObject>>;

    /// Takes the job due first, of any size, if any is due by `at`.
    fn claim(&self, at: u64) -> Result<Option<Job>> {
        self.claim_up_to(at, u64::MAX)
    }

    /// Queues again the `failed` jobs of the unhashed objects with these
    /// provisional oids, as new; returns how many.
    fn retry_failed(&self, provisional_oids: &[Oid]) -> Result<usize> {
        self.queue_again(provisional_oids, &[JobState::Failed])
    }
}

/// Multipart uploads begun and not yet completed or aborted, so a daemon
/// killed in the middle aborts them at its next start. A node's own: a
/// shared engine keeps them per node.
pub trait OpenUploads {
    /// Records `upload` as begun (before its first part).
    fn upload_started(&self, upload: &MultipartUpload) -> Result<()>;
    /// `upload` is completed or aborted.
    fn upload_ended(&self, upload: &MultipartUpload) -> Result<()>;
    /// The uploads begun and not ended, oldest first.
    fn open_uploads(&self) -> Result<Vec<MultipartUpload>>;
}

/// Objects shown to be at a key of an S3 object remote, with the ETag the
/// store gave those bytes.
pub trait SentRecords {
    /// Records `object` as at its key, replacing what was known of the key.
    fn record_sent(&self, object: &SentObject) -> Result<()>;
    /// What was last shown to be at `key`.
    fn sent_object(&self, endpoint: &str, bucket: &str, key: &str) -> Result<Option<SentObject>>;
}

/// Registrations with a Gen3 Indexd, begun before the request is sent and
/// finished with the DRS id Indexd answered.
pub trait IndexdRecords {
    /// Records that `oid` is about to be registered with `indexd`, keeping a
    /// did already known.
    fn indexd_begin(&self, indexd: &str, oid: Oid) -> Result<()>;
    /// Records `did` as `oid`'s record in `indexd`, and as the DRS id of the
    /// foreign objects with that content that have none, in one transaction.
    fn indexd_registered(&self, indexd: &str, oid: Oid, did: &str) -> Result<()>;
    /// What is recorded of `oid` in `indexd`.
    fn indexd_registration(&self, indexd: &str, oid: Oid) -> Result<Option<IndexdRegistration>>;
    /// Registrations begun in `indexd` whose answer was never recorded.
    fn indexd_unfinished(&self, indexd: &str) -> Result<Vec<Oid>>;
}
