//! What a client can ask: [`Request`], one variant per method, each
//! carrying its own payload struct (`Request::AddUrl(AddUrlRequest)`), and
//! the bounds every request is held to before any work starts.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{
    ConfigRequest, ErrorCode, Oid, TeamForgetRequest, TeamJoinRequest, TeamLeaveRequest, WireError,
};

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

/// How long a pool entry stays after the last gc that saw it referenced,
/// unless the gc is told otherwise: 24 hours.
pub const GC_GRACE_SECS: u64 = 24 * 3600;

/// One line from a client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestFrame {
    pub id: u64,
    #[serde(flatten)]
    pub request: Request,
}

/// What a client can ask. On the wire, the variant is the `method` field
/// and the payload's fields sit beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Request {
    /// Must be the first request on a connection.
    Hello(HelloRequest),
    Status,
    ReposAdd(RepoPath),
    ReposRemove(RepoPath),
    ReposList,
    /// Re-hash every pool entry.
    PoolVerify,
    Gc(GcRequest),
    /// Stop accepting, drain what is in flight, exit.
    Shutdown,
    RepoInit(RepoInitRequest),
    LfsDownload(LfsDownloadRequest),
    AddUrl(AddUrlRequest),
    LfsUpload(LfsUploadRequest),
    PrePush(PrePushRequest),
    Promote(PromoteRequest),
    Provisional(ProvisionalRequest),
    Hydrate(HydrateRequest),
    CheckOut(CheckOutRequest),
    /// The settings in force in the daemon and where each came from.
    Config(ConfigRequest),
    Fetch(FetchRequest),
    /// Remove a gone node's published roots (`drsctl team forget NODE`).
    TeamForget(TeamForgetRequest),
    /// Copy this node's own pool and registry into the team's (`drsctl team join`).
    TeamJoin(TeamJoinRequest),
    /// Copy back what this node's repos need (`drsctl team leave`).
    TeamLeave(TeamLeaveRequest),
    /// Free the copies here of objects proven elsewhere (`drsctl prune`).
    Prune(PruneRequest),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloRequest {
    pub version: u32,
    /// The caller, e.g. `drsctl 0.1.0`, for the daemon's log.
    pub client: String,
}

/// A repo to register or unregister.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoPath {
    pub path: PathBuf,
}

/// Delete the pool entries no registered repo has referenced for longer
/// than `grace_secs` (default [`GC_GRACE_SECS`]; with `dry_run`, only list
/// them). Refused while no repo is registered, unless `force`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcRequest {
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub force: bool,
    #[serde(default)]
    pub grace_secs: Option<u64>,
}

/// How many places other than this machine must be shown to hold an
/// object before `prune` frees its copies here, unless told otherwise.
pub const PRUNE_COPIES: u32 = 1;

/// Free the copies on this machine (the repos' `.git/lfs/objects` and the
/// pool) of the objects nothing here needs, each only once it is proven
/// present in at least `copies` places other than this machine (with
/// `dry_run`, only list them). `repos` are the repos to free (relative to
/// `cwd`); none: every registered repo.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PruneRequest {
    pub cwd: PathBuf,
    #[serde(default)]
    pub repos: Vec<PathBuf>,
    #[serde(default)]
    pub dry_run: bool,
    /// `None`: [`PRUNE_COPIES`].
    #[serde(default)]
    pub copies: Option<u32>,
}

/// Set `path`'s repo up for drsd (git-lfs keys naming `agent`, hooks,
/// `drs-remote`, `drs-indexd` and `drs-authz` in `.gitattributes` when
/// given) and register it; or, with `undo`, put git-lfs's own setup back and
/// unregister it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoInitRequest {
    pub path: PathBuf,
    pub agent: PathBuf,
    pub remote: Option<String>,
    /// The Gen3 Indexd pushes register objects with (its base URL).
    #[serde(default)]
    pub indexd: Option<String>,
    /// Indexd `authz` resources for new records, comma-separated.
    #[serde(default)]
    pub authz: Option<String>,
    pub undo: bool,
    /// Remove the recorded object remote.
    #[serde(default)]
    pub no_remote: bool,
}

/// For the git-lfs transfer agent: put object `oid` in `repo`'s
/// `.git/lfs/tmp` (from the pool, else from the repo's object remote).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LfsDownloadRequest {
    pub repo: PathBuf,
    pub oid: Oid,
    pub size: u64,
}

/// For the git-lfs transfer agent: take `path` into the pool and upload it
/// to the repo's object remote unless it is there already.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LfsUploadRequest {
    pub repo: PathBuf,
    pub oid: Oid,
    pub size: u64,
    pub path: PathBuf,
}

/// `drsctl add-url`: HEAD each URL (never read its content), record it in
/// the registry, write an LFS pointer at its path, make the paths
/// LFS-tracked in `.gitattributes` and `git add` them (once per request).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddUrlRequest {
    /// The client's current folder (absolute): the repo is the one
    /// containing it, and relative paths start there.
    pub cwd: PathBuf,
    /// The URLs: one from the command line, or a batch of a `--from` list's
    /// lines (at most [`MAX_REQUEST_ENTRIES`]).
    #[serde(default)]
    pub entries: Vec<AddUrlEntry>,
    /// Refused: the daemon never opens a file a client names for this (an
    /// endless one would have it read without bound). The client reads the
    /// list and sends its lines as `entries`. Still parsed, so that an
    /// older client is told rather than served nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<PathBuf>,
    /// Replace a file at PATH that is not an LFS pointer.
    #[serde(default)]
    pub force: bool,
    /// Record, but do not prefetch (an object too big, or not wanted on
    /// this machine): its pointer stays provisional.
    #[serde(default)]
    pub no_fetch: bool,
}

/// One URL for `add_url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddUrlEntry {
    pub url: String,
    /// Where the pointer goes (relative to `cwd`); default: the URL's file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The content's sha256 as the user typed it: checked by the daemon,
    /// which refuses the line (not the batch) when it is not an oid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Its line in the `--from` list (its entry in a `--manifest`), for the
    /// report [default: its place in `entries`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The object's size in bytes as the client was told it (a manifest's
    /// `file_size`): the line is refused when the object has another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The content's md5 (hex) as the client was told it (a manifest's
    /// `md5sum`): refused when the object's record names another md5, and
    /// the bytes are checked against it when they are read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
}

/// From the pre-push hook, before git-lfs runs: send every object the push
/// introduces to the repo's object remote, many at a time, so the agent
/// then finds them there. `updates` is the hook's standard input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrePushRequest {
    pub repo: PathBuf,
    pub remote: String,
    pub updates: String,
}

/// Rewrite provisional pointers whose content oid is known into content
/// pointers, in the work tree and the index (committed ones too): the
/// `paths` given (relative to `cwd`), or every one with `all`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromoteRequest {
    pub cwd: PathBuf,
    #[serde(default)]
    pub paths: Vec<PathBuf>,
    #[serde(default)]
    pub all: bool,
    /// First queue again the `failed` prefetch jobs of these pointers.
    #[serde(default)]
    pub retry: bool,
}

/// The pointers of the repo holding `cwd` that still carry a provisional
/// oid, and where each object stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvisionalRequest {
    pub cwd: PathBuf,
}

/// Put the objects of HEAD's pointers in the repo's `.git/lfs/objects`:
/// from the pool, else from the repo's object remote into the pool first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HydrateRequest {
    pub repo: PathBuf,
}

/// Replace the repo's Git LFS pointer files (checked out as pointers) with
/// their objects from the pool, leaving their index entries to be
/// refreshed; pointer files the pool cannot fill are removed for git-lfs
/// to check out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckOutRequest {
    pub repo: PathBuf,
}

/// Queue the prefetch (download and hash) of the objects behind provisional
/// pointers: the `paths` given (relative to `cwd`), or every one with
/// `all`. Jobs `skipped` (`add-url --no-fetch`) or `failed` are queued
/// again with fresh tries; objects without a job get one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchRequest {
    pub cwd: PathBuf,
    #[serde(default)]
    pub paths: Vec<PathBuf>,
    #[serde(default)]
    pub all: bool,
}

impl Request {
    /// The method's name as it travels (`add_url`), for logs.
    pub fn method(&self) -> &'static str {
        match self {
            Request::Hello(_) => "hello",
            Request::Status => "status",
            Request::ReposAdd(_) => "repos_add",
            Request::ReposRemove(_) => "repos_remove",
            Request::ReposList => "repos_list",
            Request::PoolVerify => "pool_verify",
            Request::Gc(_) => "gc",
            Request::Shutdown => "shutdown",
            Request::RepoInit(_) => "repo_init",
            Request::LfsDownload(_) => "lfs_download",
            Request::AddUrl(_) => "add_url",
            Request::LfsUpload(_) => "lfs_upload",
            Request::PrePush(_) => "pre_push",
            Request::Promote(_) => "promote",
            Request::Provisional(_) => "provisional",
            Request::Hydrate(_) => "hydrate",
            Request::CheckOut(_) => "check_out",
            Request::Config(_) => "config",
            Request::Fetch(_) => "fetch",
            Request::TeamForget(_) => "team_forget",
            Request::TeamJoin(_) => "team_join",
            Request::TeamLeave(_) => "team_leave",
            Request::Prune(_) => "prune",
        }
    }

    /// Refuses a request over the protocol's bounds, naming the limit,
    /// before any of its work starts.
    pub fn check_bounds(&self) -> Result<(), WireError> {
        let refuse = |why: String| Err(WireError::new(ErrorCode::InvalidArgument, why));
        let (items, what) = match self {
            Request::AddUrl(AddUrlRequest {
                from: Some(file), ..
            }) => {
                return refuse(format!(
                    "add_url with a file to read ({}): this drsd reads no client-named \
                     file; the client sends the list's lines as entries (upgrade drsctl)",
                    file.display()
                ))
            }
            Request::AddUrl(add) => (add.entries.len(), "add_url entries"),
            Request::Promote(promote) => (promote.paths.len(), "promote paths"),
            Request::Fetch(fetch) => (fetch.paths.len(), "fetch paths"),
            Request::Prune(prune) => (prune.repos.len(), "prune repos"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_method_name_is_the_one_on_the_wire() {
        let requests = [
            Request::Status,
            Request::Gc(GcRequest::default()),
            Request::AddUrl(AddUrlRequest::default()),
            Request::ReposAdd(RepoPath { path: "/r".into() }),
            Request::Hydrate(HydrateRequest { repo: "/r".into() }),
            Request::CheckOut(CheckOutRequest { repo: "/r".into() }),
        ];
        for request in requests {
            let json = serde_json::to_value(&request).unwrap();
            assert_eq!(json["method"], request.method(), "{json}");
        }
    }

    #[test]
    fn payload_fields_travel_beside_the_method_as_before() {
        let frame = RequestFrame {
            id: 7,
            request: Request::ReposAdd(RepoPath { path: "/r".into() }),
        };
        assert_eq!(
            serde_json::to_string(&frame).unwrap(),
            r#"{"id":7,"method":"repos_add","path":"/r"}"#
        );
        let read: RequestFrame =
            serde_json::from_str(r#"{"id":1,"method":"gc","dry_run":true}"#).unwrap();
        assert_eq!(
            read.request,
            Request::Gc(GcRequest {
                dry_run: true,
                ..GcRequest::default()
            })
        );
    }
}
