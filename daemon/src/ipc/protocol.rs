//! The wire protocol: JSON lines over the daemon's local socket.
//!
//! A client opens with [`Request::Hello`] carrying [`PROTOCOL_VERSION`]; the
//! daemon answers with its own version or a `version_mismatch` error. Every
//! request line carries a client-chosen `id`; the daemon answers with any
//! number of `progress` lines for that id, then exactly one `result` or
//! `error` line. Requests on one connection may be answered out of order.
//!
//! ```text
//! > {"id":1,"method":"hello","version":1,"client":"drsctl 0.1.0"}
//! < {"id":1,"kind":"result","result":{"type":"hello","version":1,"server":"drsd 0.1.0","pid":42}}
//! > {"id":2,"method":"pool_verify"}
//! < {"id":2,"kind":"progress","progress":{"stage":"verify","done":0,"total":12,"message":"..."}}
//! < {"id":2,"kind":"result","result":{"type":"verify","entries":12,"bad":[]}}
//! > {not json
//! < {"id":null,"kind":"error","error":{"code":"bad_request","message":"..."}}
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use crate::lfs::setup::SetupReport;
use crate::pool::{PoolStats, Tier};

/// Bumped on any change a peer of the previous version would misread.
pub const PROTOCOL_VERSION: u32 = 1;

/// The longest request line the daemon reads; a longer one gets a `too_long`
/// error and is skipped up to its newline (what a connection costs the
/// daemon is bounded by it). Room for a batch of `add_url` entries, even one
/// line of the client's longest (64 KiB, up to 6 times that JSON-escaped).
pub const MAX_REQUEST_LINE: usize = 1024 * 1024;

/// The most items any list in one request may hold (`add_url` entries,
/// `promote` paths): the line limit bounds a request's bytes, this the work
/// it starts. A request over it is refused (`invalid_argument`); drsctl
/// sends a longer `--from` list in batches.
pub const MAX_REQUEST_ENTRIES: usize = 10_000;

/// The longest response line a client reads (a status with thousands of repos
/// or a verify naming many bad entries is still far below it).
pub const MAX_RESPONSE_LINE: usize = 16 * 1024 * 1024;

/// One line from a client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestFrame {
    pub id: u64,
    #[serde(flatten)]
    pub request: Request,
}

/// What a client can ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Request {
    /// Must be the first request on a connection.
    Hello {
        version: u32,
        client: String,
    },
    Status,
    ReposAdd {
        path: PathBuf,
    },
    ReposRemove {
        path: PathBuf,
    },
    ReposList,
    /// Re-hash every pool entry.
    PoolVerify,
    /// Delete the pool entries no registered repo has referenced for longer
    /// than `grace_secs` (default [`GC_GRACE_SECS`]; with `dry_run`, only
    /// list them). Refused while no repo is registered, unless `force`.
    Gc {
        #[serde(default)]
        dry_run: bool,
        #[serde(default)]
        force: bool,
        #[serde(default)]
        grace_secs: Option<u64>,
    },
    /// Stop accepting, drain what is in flight, exit.
    Shutdown,
    /// Set `path`'s repo up for drsd (git-lfs keys naming `agent`, hooks,
    /// `drs-remote` in `.gitattributes` when given) and register it; or, with
    /// `undo`, put git-lfs's own setup back and unregister it.
    RepoInit {
        path: PathBuf,
        agent: PathBuf,
        remote: Option<String>,
        undo: bool,
    },
    /// For the git-lfs transfer agent: put object `oid` in `repo`'s
    /// `.git/lfs/tmp` (from the pool, else from the repo's object remote).
    LfsDownload {
        repo: PathBuf,
        oid: String,
        size: u64,
    },
    /// `drsctl add-url`: HEAD each URL (never read its content), record it
    /// in the registry, write an LFS pointer at its path, make the paths
    /// LFS-tracked in `.gitattributes` and `git add` them (once per request).
    AddUrl {
        /// The client's current folder (absolute): the repo is the one
        /// containing it, and relative paths start there.
        cwd: PathBuf,
        /// The URLs: one from the command line, or a batch of a `--from`
        /// list's lines (at most [`MAX_REQUEST_ENTRIES`]).
        #[serde(default)]
        entries: Vec<AddUrlEntry>,
        /// Refused: the daemon never opens a file a client names for this
        /// (an endless one would have it read without bound). The client
        /// reads the list and sends its lines as `entries`. Still parsed, so
        /// that an older client is told rather than served nothing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<PathBuf>,
        /// Replace a file at PATH that is not an LFS pointer.
        #[serde(default)]
        force: bool,
        /// Record, but do not prefetch (an object too big, or not wanted on
        /// this machine): its pointer stays provisional.
        #[serde(default)]
        no_fetch: bool,
    },
    /// For the git-lfs transfer agent: take `path` into the pool and upload
    /// it to the repo's object remote unless it is there already.
    LfsUpload {
        repo: PathBuf,
        oid: String,
        size: u64,
        path: PathBuf,
    },
    /// From the pre-push hook, before git-lfs runs: send every object the
    /// push introduces to the repo's object remote, many at a time, so the
    /// agent then finds them there. `updates` is the hook's standard input.
    PrePush {
        repo: PathBuf,
        remote: String,
        updates: String,
    },
    /// Rewrite provisional pointers whose content oid is known into content
    /// pointers, in the work tree and the index (committed ones too): the
    /// `paths` given (relative to `cwd`), or every one with `all`.
    Promote {
        cwd: PathBuf,
        #[serde(default)]
        paths: Vec<PathBuf>,
        #[serde(default)]
        all: bool,
        /// First queue again the `failed` prefetch jobs of these pointers.
        #[serde(default)]
        retry: bool,
    },
    /// The pointers of the repo holding `cwd` that still carry a provisional
    /// oid, and where each object stands.
    Provisional {
        cwd: PathBuf,
    },
    /// Put the objects of HEAD's pointers in the repo's `.git/lfs/objects`:
    /// from the pool, else from the repo's object remote into the pool first.
    Hydrate {
        repo: PathBuf,
    },
}

/// One line from the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseFrame {
    /// `None` when the request line could not be read far enough to find its id.
    pub id: Option<u64>,
    #[serde(flatten)]
    pub body: Body,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    Progress { progress: Progress },
    Result { result: Reply },
    Error { error: WireError },
}

/// How far a long request has come.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub stage: String,
    pub done: u64,
    pub total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A request's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    Hello {
        version: u32,
        server: String,
        pid: u32,
    },
    Status(StatusReport),
    Repos {
        repos: Vec<RepoReport>,
    },
    Repo {
        repo: RepoReport,
    },
    Verify(VerifyReport),
    Gc(GcReport),
    /// Where the downloaded object is, and whether it came from the `pool`
    /// or the `remote`.
    LfsObject {
        path: PathBuf,
        from: String,
    },
    LfsUploaded {
        skipped: bool,
    },
    Setup(SetupReport),
    PrePush(PushReport),
    Hydrated(HydrateReport),
    AddUrl(AddUrlReport),
    Promoted(PromoteReport),
    Provisional(ProvisionalReport),
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathWaiting {
    pub path: String,
    /// The object's URL, redacted.
    pub url: String,
    /// Its prefetch job's state: `queued`, `running`, `retrying` (after a
    /// failure, tried again later), `failed` (for good, until `drsctl
    /// promote --retry`), `held` (over the size limit) or `skipped`
    /// (`--no-fetch`); or `hashed`, when only `drsctl promote` is missing.
    pub state: String,
    /// Why its job last failed (`retrying`, `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One URL for `add_url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddUrlEntry {
    pub url: String,
    /// Where the pointer goes (relative to `cwd`); default: the URL's file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The content's sha256 as the user knows it (64 hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Its line in the `--from` list, for the report [default: its place in `entries`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
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
    pub oid: String,
    pub size: u64,
    /// Whether `oid` is the provisional oid (from the ETag) rather than the
    /// content's sha256.
    pub provisional: bool,
    /// Where the oid came from: `sha256_option`, `store_checksum`, `registry`
    /// or `etag`.
    pub oid_from: String,
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
    pub oid: String,
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectProblem {
    pub oid: String,
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

impl From<PoolStats> for PoolStatsReport {
    fn from(stats: PoolStats) -> Self {
        let tiers = stats
            .tiers
            .into_iter()
            .map(|t| TierLine {
                tier: t.tier,
                engine: t.engine,
                entries: t.stats.entries,
                bytes: t.stats.bytes,
            })
            .collect();
        PoolStatsReport {
            threshold: stats.threshold,
            tiers,
            age_secs: 0,
        }
    }
}

/// The background job queue (prefetch, hash, upload). No jobs exist yet; the
/// shape is fixed so scripts can rely on it.
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
    /// Jobs not done (the first 100), with the reason of a failure.
    #[serde(default)]
    pub open: Vec<crate::registry::JobLine>,
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

/// How long a pool entry stays after the last gc that saw it referenced,
/// unless the gc is told otherwise: 24 hours.
pub const GC_GRACE_SECS: u64 = 24 * 3600;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcEntry {
    /// The entry's key in hex (its sha256 when well-formed).
    pub key: String,
    pub tier: Tier,
    pub bytes: u64,
}

/// An error as it travels: a stable code for scripts, a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({code})")]
pub struct WireError {
    pub code: ErrorCode,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not JSON or not a known request.
    BadRequest,
    /// The line is longer than [`MAX_REQUEST_LINE`].
    TooLong,
    /// A request came before `hello`.
    HandshakeRequired,
    VersionMismatch,
    /// The peer runs as another user.
    PermissionDenied,
    /// An argument names something that is not there or not usable.
    InvalidArgument,
    NotFound,
    /// The daemon failed at something on its side.
    Internal,
    /// A file system the daemon writes to (the pool, the state folder, a
    /// repo) is full: free space there, then try again. The message names
    /// the file.
    NoSpace,
}

impl ErrorCode {
    /// This code, or `no_space` when a full file system is behind `error`.
    pub fn or_no_space(self, error: &(dyn std::error::Error + 'static)) -> ErrorCode {
        if out_of_space(error) {
            ErrorCode::NoSpace
        } else {
            self
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = serde_json::to_value(self).ok();
        f.write_str(text.as_ref().and_then(|v| v.as_str()).unwrap_or("unknown"))
    }
}

impl WireError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> WireError {
        WireError {
            code,
            message: message.into(),
        }
    }

    /// `error` as it travels: `code`, unless a full file system is behind
    /// it (anywhere in its chain of causes), which is `no_space` whatever
    /// the operation was: the one thing the user can do is free space.
    pub fn from_error(code: ErrorCode, error: &(dyn std::error::Error + 'static)) -> WireError {
        WireError::new(code.or_no_space(error), error.to_string())
    }
}

/// Whether `error` or one of its causes is a full file system: an I/O error
/// `ENOSPC` / `EDQUOT` (`StorageFull`, `QuotaExceeded`), or SQLite's
/// "database or disk is full".
pub fn out_of_space(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            let full = matches!(
                io.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ) || matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
            if full {
                return true;
            }
        }
        if let Some(rusqlite::Error::SqliteFailure(f, _)) = e.downcast_ref::<rusqlite::Error>() {
            if f.code == rusqlite::ErrorCode::DiskFull {
                return true;
            }
        }
        next = e.source();
    }
    false
}

impl Request {
    /// Refuses a request over the protocol's bounds, naming the limit,
    /// before any of its work starts.
    pub fn check_bounds(&self) -> Result<(), WireError> {
        let refuse = |why: String| Err(WireError::new(ErrorCode::InvalidArgument, why));
        let (items, what) = match self {
            Request::AddUrl {
                from: Some(file), ..
            } => {
                return refuse(format!(
                    "add_url with a file to read ({}): this drsd reads no client-named \
                     file; the client sends the list's lines as entries (upgrade drsctl)",
                    file.display()
                ))
            }
            Request::AddUrl { entries, .. } => (entries.len(), "add_url entries"),
            Request::Promote { paths, .. } => (paths.len(), "promote paths"),
            _ => return Ok(()),
        };
        if items > MAX_REQUEST_ENTRIES {
            return refuse(format!(
                "{items} {what} in one request: the limit is {MAX_REQUEST_ENTRIES}; send them in batches"
            ));
        }
        Ok(())
    }
}

impl ResponseFrame {
    pub fn result(id: u64, result: Reply) -> ResponseFrame {
        ResponseFrame {
            id: Some(id),
            body: Body::Result { result },
        }
    }

    pub fn progress(id: u64, progress: Progress) -> ResponseFrame {
        ResponseFrame {
            id: Some(id),
            body: Body::Progress { progress },
        }
    }

    pub fn error(id: Option<u64>, error: WireError) -> ResponseFrame {
        ResponseFrame {
            id,
            body: Body::Error { error },
        }
    }
}

#[cfg(test)]
mod no_space_tests {
    use super::*;
    use crate::pool::PoolError;

    #[test]
    fn a_full_disk_anywhere_in_the_cause_chain_is_no_space() {
        let full = PoolError::Io {
            op: "write",
            path: "/pool/large/stage/x".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        };
        let wire = WireError::from_error(ErrorCode::InvalidArgument, &full);
        assert_eq!(wire.code, ErrorCode::NoSpace);
        assert!(
            wire.message.contains("/pool/large/stage/x"),
            "{}",
            wire.message
        );
        let sqlite = PoolError::Sqlite {
            op: "put",
            path: "/pool/kv.sqlite".into(),
            source: rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                None,
            ),
        };
        assert_eq!(
            WireError::from_error(ErrorCode::Internal, &sqlite).code,
            ErrorCode::NoSpace
        );
        let other = PoolError::Io {
            op: "open",
            path: "/x".into(),
            source: std::io::Error::from_raw_os_error(libc::EACCES),
        };
        assert_eq!(
            WireError::from_error(ErrorCode::Internal, &other).code,
            ErrorCode::Internal
        );
        assert_eq!(ErrorCode::NoSpace.to_string(), "no_space");
    }
}
