//! What the daemon answers: [`Reply`], one variant per kind of outcome,
//! and the reports it carries. Everything here is a wire type: the daemon
//! converts its own (pool statistics, registry rows, scan results) into
//! these at its edge, so a client never compiles the daemon's internals.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{ConfigReport, FileStamp, Oid, TeamForgetReport, TeamMigrateReport};

/// A request's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    Hello(HelloReply),
    Status(Box<StatusReport>),
    Repos { repos: Vec<RepoReport> },
    Repo { repo: RepoReport },
    Verify(VerifyReport),
    Gc(GcReport),
    LfsObject(LfsObject),
    LfsUploaded(LfsUploaded),
    Setup(SetupReport),
    PrePush(PushReport),
    Hydrated(HydrateReport),
    CheckedOut(CheckOutReport),
    AddUrl(AddUrlReport),
    Promoted(PromoteReport),
    Provisional(ProvisionalReport),
    Config(ConfigReport),
    Fetched(FetchReport),
    TeamForgot(TeamForgetReport),
    TeamJoined(TeamMigrateReport),
    TeamLeft(TeamMigrateReport),
    Pruned(PruneReport),
    Done,
}

/// A repo's pointers that still carry a provisional oid.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvisionalReport {
    pub repo: PathBuf,
    pub pointers: Vec<PathWaiting>,
}

/// What a promote request did, by path (relative to the repo's top).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromoteReport {
    pub repo: PathBuf,
    pub rewritten: Vec<String>,
    /// Provisional still: the object is not hashed yet (its job's state).
    pub waiting: Vec<PathWaiting>,
    /// The index or the work tree no longer holds the provisional pointer.
    pub changed: Vec<String>,
}

/// What a fetch request did, by path (relative to the repo's top).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchReport {
    pub repo: PathBuf,
    /// Provisional pointers whose objects are now on their way, or were
    /// already (their job's state: `queued`, `running`, `retrying`, `held`).
    pub fetching: Vec<PathWaiting>,
    /// Provisional pointers whose objects are hashed already: promote them.
    pub hashed: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathWaiting {
    pub path: String,
    /// The object's URL, redacted.
    pub url: String,
    /// Its prefetch job's state; `hashed` when only `drsctl promote` is missing.
    pub state: JobState,
    /// Why its job last failed (`retrying`, `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What `add_url` did: the pointers written and staged, the lines refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddUrlReport {
    pub repo: PathBuf,
    pub added: Vec<AddedUrl>,
    pub failed: Vec<FailedUrl>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddedUrl {
    /// The line of the `--from` file (1 for a URL on the command line).
    pub line: usize,
    /// The URL without its query string.
    pub url: String,
    /// The pointer's path, relative to the repo's top.
    pub path: String,
    pub oid: Oid,
    pub size: u64,
    /// Whether `oid` is the provisional oid (from the ETag) rather than the
    /// content's sha256.
    pub provisional: bool,
    /// Where the oid came from.
    pub oid_from: OidSource,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedUrl {
    pub line: usize,
    /// The URL without its query string (or the line's start when it is not a URL).
    pub url: String,
    pub message: String,
}

/// What a pre-push request found and did, counted in objects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushReport {
    /// Objects the push introduces.
    pub objects: u64,
    pub uploaded: u64,
    /// Already in the object remote.
    pub present: u64,
    /// Foreign objects made findable in the object remote by a server-side
    /// copy (no byte through this machine).
    #[serde(default)]
    pub copied: u64,
    /// Objects a Gen3 Indexd holds already at a readable location: neither
    /// sent nor registered again (counted in `present` too).
    #[serde(default)]
    pub in_indexd: u64,
    /// Objects registered with the repo's Indexd by this push.
    #[serde(default)]
    pub registered: u64,
    /// Objects counted present on the word of a source the user trusts
    /// (the `trust_claims` setting) without their bytes shown (counted in
    /// `present` too), and those sources.
    #[serde(default)]
    pub trusted: u64,
    #[serde(default)]
    pub trusted_sources: Vec<String>,
    /// Objects that could not be sent or checked now (the store
    /// unreachable, a disk full), with the reason and paths: the push must
    /// not go on, but may succeed when tried again.
    pub failed: Vec<RefusedPath>,
    /// Objects that are neither local nor in the object remote, are not
    /// what their pointer says, or still carry a provisional oid: the push
    /// must not go on. Paths named, and what to do.
    #[serde(default)]
    pub refused: Vec<RefusedPath>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedPath {
    #[serde(default)]
    pub paths: Vec<String>,
    pub oid: Oid,
    pub why: String,
}

/// What a hydrate request found and did, counted in objects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HydrateReport {
    pub objects: u64,
    /// Already in `.git/lfs/objects`.
    pub present: u64,
    pub from_pool: u64,
    pub downloaded: u64,
    pub failed: Vec<ObjectProblem>,
}

/// What a check-out request did, counted in files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckOutReport {
    /// Pointer files replaced by their objects from the pool, and their bytes.
    pub written: u64,
    pub bytes: u64,
    /// Pointer files removed for git-lfs to check out (a pointer text that
    /// is not canonical, an object the pool does not hold): git paths.
    #[serde(default)]
    pub to_git: Vec<String>,
    /// Files left as they were, and why.
    #[serde(default)]
    pub left: Vec<PathProblem>,
    /// The large files written, stamped: their index refresh need not hash
    /// them again (see [`FileStamp`]).
    #[serde(default)]
    pub stamps: Vec<FileStamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathProblem {
    pub path: String,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectProblem {
    pub oid: Oid,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    pub version: String,
    pub pid: u32,
    pub uptime_secs: u64,
    /// Seconds with nothing to do after which the daemon stops (one started
    /// on demand); `None`: it runs until stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_secs: Option<u64>,
    pub socket: PathBuf,
    pub pool_dir: PathBuf,
    pub pool: PoolStatsReport,
    pub repos: Vec<RepoReport>,
    pub queue: QueueReport,
    /// Object remotes and Indexd servers whose claims count as proof that
    /// an object is there (the `trust_claims` setting; none by default).
    #[serde(default)]
    pub trusted_at_their_word: Vec<String>,
    /// Uploads to a Gen3 commons begun and not finished (a push killed or
    /// refused part-way): the next push of the object finishes them.
    #[serde(default)]
    pub commons_uploads: Vec<CommonsUploadLine>,
    /// The registry's engine: `sqlite` (this machine's own) or `postgres`
    /// (a team's); the pool's engines are in [`PoolStatsReport::tiers`].
    #[serde(default)]
    pub registry_engine: String,
    /// The team this daemon is a node of (the `team_db` setting), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<Box<TeamReport>>,
}

/// One object's upload to a Gen3 commons, not finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommonsUploadLine {
    /// The commons as recorded: `gen3+https://host`.
    pub commons: String,
    pub oid: Oid,
    /// The record begun for it, once known.
    pub did: Option<String>,
    /// How far it got: `begun`, `blank`, `uploading`, `uploaded`.
    pub step: String,
}

/// A lab's machines sharing one PostgreSQL database (issue 31).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamReport {
    /// The team database, as `postgresql://user@host:port/db`: never its
    /// password.
    pub server: String,
    /// This daemon's name among the nodes.
    pub node: String,
    /// Every node that joined, most recently seen first (none when the
    /// database did not answer).
    pub nodes: Vec<TeamNode>,
    /// Why the database is shown unreachable: it did not answer the status's
    /// reads in time, or failed them. `None` when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<String>,
}

/// One daemon of a team: a user on a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamNode {
    pub name: String,
    pub host: String,
    pub user: String,
    /// When the node last renewed its leases (seconds since the epoch, by
    /// the database's clock).
    pub last_seen: u64,
    /// How long ago that was, by the database's clock (the nodes' clocks
    /// need not agree).
    pub seen_secs_ago: u64,
}

/// The pool's entries and bytes per tier (the pool's own report, made comparable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolStatsReport {
    pub threshold: u64,
    pub tiers: Vec<TierLine>,
    /// How old these figures are: the daemon measures the pool in the
    /// background, not on each status request.
    #[serde(default)]
    pub age_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierLine {
    pub tier: Tier,
    pub engine: String,
    pub entries: u64,
    pub bytes: u64,
}

/// The background job queue: prefetches and their hashing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueReport {
    pub queued: u64,
    pub running: u64,
    /// Failed, tried again after a backoff.
    #[serde(default)]
    pub retrying: u64,
    /// Failed for good (the error cannot pass by itself, or the content
    /// did not match three times): `drsctl promote --retry` tries again.
    #[serde(default)]
    pub failed: u64,
    /// Not fetched: over the size limit, or added with `--no-fetch`.
    #[serde(default)]
    pub held: u64,
    #[serde(default)]
    pub done: u64,
    /// Downloads in progress.
    #[serde(default)]
    pub active: Vec<JobProgress>,
    /// Jobs not done (the first 100), with the reason of a failure; then
    /// done jobs with a note (an ETag that could not be verified).
    #[serde(default)]
    pub open: Vec<JobLine>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobProgress {
    pub url: String,
    pub done: u64,
    pub total: u64,
    pub bytes_per_sec: u64,
}

/// A registered repo and what its last scan found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoReport {
    pub path: PathBuf,
    pub state: RepoState,
    /// Why the repo is `missing` or `error`, or why it is polled instead of watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan: Option<ScanReport>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepoState {
    /// Registered, first scan not done yet (just after a start).
    Pending,
    /// Watched for changes through the OS.
    Watching,
    /// The OS refused a watch (e.g. the inotify limit): rescanned on a timer.
    Polling,
    /// The folder or its `.git` is gone; kept registered until removed.
    Missing,
    /// The last scan failed (see `problem`).
    Error,
}

/// The LFS pointers in a repo's HEAD tree and where their objects are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanReport {
    /// HEAD's commit; `None` on an unborn branch.
    pub head: Option<String>,
    pub pointers: u64,
    /// Objects present in the repo's `.git/lfs/objects`.
    pub in_repo: u64,
    /// Objects not in the repo but in the pool.
    pub in_pool: u64,
    /// Objects found in neither.
    pub absent: u64,
    /// Seconds since the Unix epoch.
    pub scanned_at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    pub entries: u64,
    pub bad: Vec<BadEntryReport>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadEntryReport {
    /// The entry's key in hex (its sha256 when well-formed).
    pub key: String,
    pub tier: Tier,
    pub problem: String,
    /// Where the entry's bytes were moved, out of every lookup (`None`:
    /// it was gone before it could be moved).
    #[serde(default)]
    pub quarantined: Option<String>,
}

/// What a gc removed from the pool, or would remove in a dry run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcReport {
    pub dry_run: bool,
    /// The registered repos whose objects were kept.
    pub repos: usize,
    /// Entries some repo references.
    pub kept: usize,
    /// Entries no repo references, kept because a put was writing them, or
    /// was done only after the gc began: their pointers may be on the way.
    pub recent: usize,
    pub removed: Vec<GcEntry>,
    /// The bytes of `removed`.
    pub bytes: u64,
    /// Bytes the kv tier's database gave back to the file system afterwards.
    #[serde(default)]
    pub compacted: u64,
    /// Entries no repo references now, kept because one did (or they were
    /// stored) less than the grace period ago.
    #[serde(default)]
    pub waiting: usize,
    /// The grace period this gc used, in seconds.
    #[serde(default)]
    pub grace_secs: u64,
    /// Partial downloads no job will resume, removed (or, in a dry run,
    /// that would be).
    #[serde(default)]
    pub partials: PartialsRemoved,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialsRemoved {
    pub files: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcEntry {
    /// The entry's key in hex (its sha256 when well-formed).
    pub key: String,
    pub tier: Tier,
    pub bytes: u64,
}

/// What a prune freed, or would free in a dry run: each object nothing
/// here needs, with where its copies were proven and whether its copies
/// here went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PruneReport {
    pub dry_run: bool,
    /// The places other than this machine asked for.
    pub copies: u32,
    /// The repos whose copies were considered.
    pub repos: Vec<PathBuf>,
    /// Where copies were looked for (an object remote's URL); objects name
    /// them by index, so a long list stays short on the wire.
    pub places: Vec<String>,
    /// Objects that nothing here needs, freed (or not: `kept` says why).
    pub objects: Vec<PrunedObject>,
    /// Objects kept because a repo needs them (checked out, staged,
    /// stashed, unpushed, a branch or tag tip, recent).
    pub needed: u64,
    /// Objects freed (or, in a dry run, that would be).
    pub freed: u64,
    /// The bytes given back to the file system (or that would be).
    pub bytes: u64,
    /// Requests made to the places to prove the copies.
    #[serde(default)]
    pub proofs: u64,
}

impl PruneReport {
    /// `object`'s line, as drsctl prints it: freed (or would be) and where
    /// its copies were proven, or kept and why. `places` are the report's.
    pub fn line(object: &PrunedObject, places: &[String], dry_run: bool) -> String {
        let proven: Vec<String> = object
            .proven
            .iter()
            .map(|p| {
                let place = places.get(p.place as usize).map_or("?", String::as_str);
                match p.how.as_str() {
                    "proven" => place.to_string(),
                    how => format!("{place} ({how})"),
                }
            })
            .collect();
        let at = match proven.is_empty() {
            true => String::new(),
            false => format!(": proven in {}", proven.join(", ")),
        };
        match (&object.kept, dry_run) {
            (Some(why), _) => format!("kept {} ({} bytes){at}; {why}", object.oid, object.size),
            (None, true) => format!("would free {} ({} bytes){at}", object.oid, object.size),
            (None, false) => format!("freed {} ({} bytes){at}", object.oid, object.size),
        }
    }
}

/// One object a prune looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrunedObject {
    pub oid: Oid,
    pub size: u64,
    /// The places (indices into [`PruneReport::places`]) shown to hold it.
    pub proven: Vec<ProvenCopy>,
    /// Its copies here went (in a dry run: would go).
    pub freed: bool,
    /// Why it was kept (not proven in enough places; a place's answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
    /// Repo copies (`.git/lfs/objects`) freed or to free.
    pub repo_copies: u32,
    /// The pool's entry freed or to free.
    pub pool: bool,
}

/// A place shown to hold an object, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvenCopy {
    pub place: u32,
    /// `proven`: its bytes shown (hashed here, or a content-derived ETag
    /// checked); `trusted`: taken at the store's word (`trust_claims`).
    pub how: String,
}

/// The handshake's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloReply {
    pub version: u32,
    /// The daemon's name and version (`drsd 0.1.0`).
    pub server: String,
    pub pid: u32,
}

/// Where a downloaded object is, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LfsObject {
    pub path: PathBuf,
    pub from: ObjectSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectSource {
    /// The shared pool had it (checked against its oid on the way out).
    Pool,
    /// Fetched from the repo's object remote (into the pool first).
    Remote,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LfsUploaded {
    /// The object remote had it already: nothing was sent.
    pub skipped: bool,
}

/// Where an added URL's oid came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OidSource {
    /// The user's `--sha256`.
    Sha256Option,
    /// The store's own sha256 checksum (`x-amz-checksum-sha256`, or drsd's
    /// `x-amz-meta-sha256`).
    StoreChecksum,
    /// The SHA-256 checksum of the object's GA4GH DRS record.
    DrsChecksum,
    /// An object already recorded with the same URL, size and ETag.
    Registry,
    /// The content itself, read and hashed during the add-url (an object
    /// small enough for the pool's small tier).
    Hashed,
    /// A provisional oid made from the URL and ETag: the content is not
    /// hashed yet.
    Etag,
}

/// A prefetch job's state, as status and promote show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Running,
    /// Failed, tried again after a backoff.
    Retrying,
    /// Failed for good (until `drsctl promote --retry`).
    Failed,
    /// Over the size limit: not fetched.
    Held,
    /// Added with `--no-fetch`: not fetched.
    Skipped,
    Done,
    /// The content oid is known (hashed, or given): only `drsctl promote`
    /// is missing. Not a queue state: no job row carries it.
    Hashed,
}

impl JobState {
    /// States no worker leaves by itself: only a user's action (a larger
    /// size limit, `drsctl promote --retry`) changes them.
    pub fn is_settled(self) -> bool {
        matches!(self, JobState::Failed | JobState::Held | JobState::Skipped)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Retrying => "retrying",
            JobState::Failed => "failed",
            JobState::Held => "held",
            JobState::Skipped => "skipped",
            JobState::Done => "done",
            JobState::Hashed => "hashed",
        }
    }
}

/// A text that names no [`JobState`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a job state")]
pub struct UnknownJobState(pub String);

impl std::str::FromStr for JobState {
    type Err = UnknownJobState;

    /// The name [`JobState::as_str`] gives.
    fn from_str(s: &str) -> Result<JobState, UnknownJobState> {
        const ALL: [JobState; 8] = [
            JobState::Queued,
            JobState::Running,
            JobState::Retrying,
            JobState::Failed,
            JobState::Held,
            JobState::Skipped,
            JobState::Done,
            JobState::Hashed,
        ];
        ALL.into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownJobState(s.to_string()))
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// A job as `drsctl status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobLine {
    /// The URL, redacted.
    pub url: String,
    pub size: u64,
    pub state: JobState,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When a `retrying` job is tried again (seconds since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<u64>,
}

/// A pool tier: the kv engine for small objects, files for large ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Kv,
    Large,
}

impl Tier {
    /// The tier's name, as the wire and every listing spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Kv => "kv",
            Tier::Large => "large",
        }
    }
}

/// `kv` or `large`, padded as asked (`{:<6}` lines up listings).
impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// What init or undo changed; empty when the repo was already as wanted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupReport {
    pub repo: PathBuf,
    pub changed: Vec<String>,
    /// The object remote recorded after init (`None`: pushes of LFS
    /// objects have nowhere to go).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_shown_to_people_are_the_names_on_the_wire() {
        for state in [JobState::Queued, JobState::Retrying, JobState::Hashed] {
            assert_eq!(state.to_string().parse::<JobState>(), Ok(state));
            assert_eq!(
                serde_json::to_value(state).unwrap(),
                state.to_string().as_str()
            );
        }
        for tier in [Tier::Kv, Tier::Large] {
            assert_eq!(
                serde_json::to_value(tier).unwrap(),
                tier.to_string().as_str()
            );
        }
        assert_eq!(
            serde_json::to_value(OidSource::StoreChecksum).unwrap(),
            "store_checksum"
        );
    }

    #[test]
    fn only_failed_held_and_skipped_are_settled() {
        let settled: Vec<JobState> = [
            JobState::Queued,
            JobState::Running,
            JobState::Retrying,
            JobState::Failed,
            JobState::Held,
            JobState::Skipped,
            JobState::Done,
            JobState::Hashed,
        ]
        .into_iter()
        .filter(|s| s.is_settled())
        .collect();
        assert_eq!(
            settled,
            [JobState::Failed, JobState::Held, JobState::Skipped]
        );
    }
}
