//! What the git-lfs transfer agent asks: objects into and out of a repo,
//! through the pool, and to and from the repo's object remote.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::{internal, Progressor, Shared};
use crate::ipc::{ErrorCode, LfsObject, LfsUploaded, ObjectSource, Progress, Reply, WireError};
use crate::lfs::hydrate::export_to_temp;
use crate::lfs::scan::{git_dirs, toplevel};
use crate::lfs::setup::recorded_remote;
use crate::pool::{Oid, PoolError};
use crate::remote::{
    fetch_into_pool, shared_s3, upload_from_file, upload_from_pool, Fetch, FetchOptions,
    ObjectLayout, Origin, S3Client, UploadError, Uploaded,
};

fn s3() -> Result<Arc<S3Client>, WireError> {
    shared_s3().map_err(|e| crate::server::wire_error::wire_error(ErrorCode::InvalidArgument, &e))
}

/// What a transfer needs to know about a repo, found with git once and kept
/// until the repo's `.gitattributes` (where the remote is recorded) changes:
/// thousands of small objects must not cost three git processes each.
#[derive(Clone)]
pub(super) struct RepoFacts {
    /// The work tree's canonical top: the key of the repo's write lock.
    pub top: PathBuf,
    /// `<common git dir>/lfs`: git-lfs's objects and tmp folders.
    pub lfs: PathBuf,
    /// `<lfs>/tmp`: on the repo's filesystem, where git-lfs renames what
    /// the agent hands it.
    pub tmp: PathBuf,
    pub remote: Option<String>,
    attributes: PathBuf,
    stamp: Option<SystemTime>,
}

static FACTS: Mutex<BTreeMap<PathBuf, RepoFacts>> = Mutex::new(BTreeMap::new());

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

pub(super) async fn facts(repo: &Path) -> Result<RepoFacts, WireError> {
    let cached = FACTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(repo)
        .cloned();
    if let Some(facts) = cached.filter(|f| modified(&f.attributes) == f.stamp) {
        return Ok(facts);
    }
    let path = repo.to_path_buf();
    let facts = tokio::task::spawn_blocking(move || {
        let bad =
            |e: &dyn std::fmt::Display| WireError::new(ErrorCode::InvalidArgument, e.to_string());
        let top = toplevel(&path).map_err(|e| bad(&e))?;
        let common = git_dirs(&top).map_err(|e| bad(&e))?.common_dir;
        let lfs = common.join("lfs");
        // Not through a link planted in `.git`: objects are handed out here.
        let tmp = crate::safe_write::create_dirs(&common, Path::new("lfs/tmp"))
            .map_err(|e| WireError::new(ErrorCode::Internal, e.to_string()))?;
        let attributes = top.join(".gitattributes");
        let stamp = modified(&attributes);
        let remote = recorded_remote(&top).map_err(|e| bad(&e))?;
        Ok::<_, WireError>(RepoFacts {
            top,
            lfs,
            tmp,
            remote,
            attributes,
            stamp,
        })
    })
    .await
    .map_err(internal)??;
    FACTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(repo.to_path_buf(), facts.clone());
    Ok(facts)
}

/// The repo's object remote, from its committed `.gitattributes`.
pub(super) fn layout(repo: &Path, facts: &RepoFacts) -> Result<ObjectLayout, WireError> {
    let url = facts.remote.as_deref().ok_or_else(|| {
        WireError::new(
            ErrorCode::InvalidArgument,
            format!(
                "{} has no object remote: record one with drsctl init --remote s3://bucket/prefix (it goes in .gitattributes)",
                repo.display()
            ),
        )
    })?;
    ObjectLayout::parse(url).map_err(|e| crate::server::wire_error::wire_error(ErrorCode::InvalidArgument, &e))
}

pub(super) async fn download(
    shared: &Arc<Shared>,
    repo: PathBuf,
    oid: Oid,
    size: u64,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let facts = facts(&repo).await?;
    let report = |done| {
        progress.send_now(Progress {
            stage: crate::ipc::Stage::Download,
            done,
            total: Some(size),
            message: None,
        })
    };
    let mut from = fetch_object(shared, &repo, &facts, oid, size, &report).await?;
    let mut exported = export(shared, oid, &facts.tmp).await?;
    if let Err(corrupt @ PoolError::Corrupt { .. }) = &exported {
        // Moved aside on the way out: fetched from the object remote as
        // if the pool never had it, and git gets those bytes instead.
        from = fetch_object(shared, &repo, &facts, oid, size, &report)
            .await
            .map_err(|e| {
                WireError::new(
                    e.code,
                    format!("{corrupt}; and from the object remote: {}", e.message),
                )
            })?;
        exported = export(shared, oid, &facts.tmp).await?;
    }
    let exported = exported.map_err(|e| WireError::new(ErrorCode::Internal, e.to_string()))?;
    let path = exported.ok_or_else(|| {
        WireError::new(
            ErrorCode::Internal,
            format!("object {oid} left the pool right after its download"),
        )
    })?;
    Ok(Reply::LfsObject(LfsObject { path, from }))
}

/// Makes sure the pool holds `oid`: there already, or fetched from the
/// repo's object remote.
pub(super) async fn fetch_object(
    shared: &Arc<Shared>,
    repo: &Path,
    facts: &RepoFacts,
    oid: Oid,
    size: u64,
    report: &(dyn Fn(u64) + Sync),
) -> Result<ObjectSource, WireError> {
    // One download per object at a time: a second request (another repo's
    // pull) waits here and then finds the object in the pool.
    let gate = gate(oid);
    let _turn = gate.lock().await;
    let pool = shared.pool.clone();
    let held = tokio::task::spawn_blocking(move || pool.size(&oid))
        .await
        .map_err(internal)?
        .map_err(internal)?;
    if held == Some(size) {
        return Ok(ObjectSource::Pool);
    }
    let layout = layout(repo, facts)?;
    let client = s3()?;
    let key = layout.key(&oid);
    let object = format!("s3://{}/{key}", layout.bucket);
    // A large object is HEADed for its ETag, so ranges ask `If-Match` it
    // and a partial download can resume; a small one comes in one GET, its
    // sha256 checked like every download's.
    let etag = if size > RESUMABLE_FROM {
        let meta = client
            .head(&layout.bucket, &key)
            .await
            .map_err(remote)?
            .ok_or_else(|| {
                WireError::new(
                    ErrorCode::NotFound,
                    format!("object {oid} is not in {object}"),
                )
            })?;
        if meta.size != size {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "{object} holds {} bytes, the pointer says {size}",
                    meta.size
                ),
            ));
        }
        meta.etag
    } else {
        None
    };
    let req = Fetch {
        origin: Origin::S3 {
            client: &client,
            bucket: &layout.bucket,
            key: &key,
        },
        size,
        etag: etag.as_deref(),
        last_modified: None, // the sha256 is the check
        expect: Some(oid),
        md5: false,
        part_size: None, // the sha256 is known: it is the check
    };
    fetch_into_pool(shared.pool.clone(), req, FetchOptions::default(), report)
        .await
        .map_err(|e| crate::server::wire_error::wire_error(ErrorCode::Internal, &e))?;
    Ok(ObjectSource::Remote)
}

/// Objects above this size are worth a HEAD first, for an ETag to resume by.
const RESUMABLE_FROM: u64 = 8 << 20;

pub(super) async fn upload(
    shared: &Arc<Shared>,
    repo: PathBuf,
    oid: Oid,
    size: u64,
    path: PathBuf,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let layout = layout(&repo, &facts(&repo).await?)?;
    let skipped = send_local(shared, &layout, oid, size, path).await?;
    progress
        .send(Progress {
            stage: crate::ipc::Stage::Upload,
            done: size,
            total: Some(size),
            message: None,
        })
        .await;
    Ok(Reply::LfsUploaded(LfsUploaded { skipped }))
}

/// Sends object `oid` of `size` bytes, whose repo copy is at `path`, to
/// `layout` unless it is there; true when it was. It goes through the pool
/// (taking the repo's copy in), or, when the pool cannot take it (a full
/// disk, a broken pool), straight from the repo's copy: the pool is a cache,
/// and a push must not depend on it.
pub(super) async fn send_local(
    shared: &Arc<Shared>,
    layout: &ObjectLayout,
    oid: Oid,
    size: u64,
    path: PathBuf,
) -> Result<bool, WireError> {
    match take_in(shared, oid, size, Some(path.clone())).await {
        Ok(()) => send_object(shared, layout, oid).await,
        Err(e) if matches!(e.code, ErrorCode::Internal | ErrorCode::NoSpace) && path.is_file() => {
            log::warn!(
                "object {oid}: the pool could not take it ({}); uploading it from {}",
                e.message,
                path.display()
            );
            send_file(shared, layout, oid, &path).await
        }
        Err(e) => Err(e),
    }
}

/// Uploads the repo's copy of `oid` at `path` (checked against the oid on
/// the way) to `layout` unless it is there; true when it was.
async fn send_file(
    shared: &Arc<Shared>,
    layout: &ObjectLayout,
    oid: Oid,
    path: &Path,
) -> Result<bool, WireError> {
    let client = s3()?;
    let uploaded = upload_from_file(&client, path, layout, &oid, shared.config.upload)
        .await
        .map_err(|e| {
            let code = match e {
                UploadError::NotTheObject { .. } => ErrorCode::InvalidArgument,
                _ => ErrorCode::Internal,
            };
            crate::server::wire_error::wire_error(code, &e)
        })?;
    confirm_sent(layout, oid);
    Ok(matches!(uploaded, Uploaded::Skipped(_)))
}

/// Makes sure the pool holds `oid` of `size` bytes, adopting the repo's file
/// at `path` when it does not (hashed on the way in). The pool's own copy is
/// verified already and is not read again. `not_found` when neither has it,
/// `invalid_argument` when the repo's copy is not the object, `internal` or
/// `no_space` when the pool failed to take it.
pub(super) async fn take_in(
    shared: &Arc<Shared>,
    oid: Oid,
    size: u64,
    path: Option<PathBuf>,
) -> Result<(), WireError> {
    let pool = shared.pool.clone();
    let from = path.as_ref().map(|p| p.display().to_string());
    let len = tokio::task::spawn_blocking(move || match (pool.size(&oid)?, path) {
        (Some(len), _) => Ok(Some(len)),
        (None, Some(path)) if path.is_file() => {
            pool.adopt_file(&path, Some(&oid)).map(|put| Some(put.len))
        }
        (None, _) => Ok(None),
    })
    .await
    .map_err(internal)?
    .map_err(|e| match e {
        PoolError::HashMismatch { .. } => WireError::new(
            ErrorCode::InvalidArgument,
            format!("{}: {e}", from.unwrap_or_default()),
        ),
        _ => crate::server::wire_error::wire_error(ErrorCode::Internal, &e),
    })?;
    match len {
        Some(len) if len == size => Ok(()),
        Some(len) => Err(WireError::new(
            ErrorCode::InvalidArgument,
            format!("object {oid} has {len} bytes, the pointer says {size}"),
        )),
        None => Err(WireError::new(
            ErrorCode::NotFound,
            format!("object {oid} is neither in the pool nor in the repo"),
        )),
    }
}

/// Uploads pool entry `oid` to `layout` unless it is there; true when it
/// was (or this daemon sent or saw it there in the last few minutes: the
/// pre-push hook's batch is not checked again when git-lfs asks per object).
pub(super) async fn send_object(
    shared: &Arc<Shared>,
    layout: &ObjectLayout,
    oid: Oid,
) -> Result<bool, WireError> {
    let place = format!("{}/{}", layout.bucket, layout.prefix);
    if confirmed(&place, oid) {
        return Ok(true);
    }
    let client = s3()?;
    let uploaded = upload_from_pool(
        &client,
        shared.pool.clone(),
        layout,
        &oid,
        shared.config.upload,
    )
    .await
    .map_err(|e| crate::server::wire_error::wire_error(ErrorCode::Internal, &e))?;
    confirm(place, oid);
    Ok(matches!(uploaded, Uploaded::Skipped(_)))
}

/// Records that `layout` holds `oid` (put there another way than
/// [`send_object`]), so the agent does not check it again.
pub(super) fn confirm_sent(layout: &ObjectLayout, oid: Oid) {
    confirm(format!("{}/{}", layout.bucket, layout.prefix), oid);
}

/// How long an object this daemon sent or found stays known to be there.
const CONFIRMED_FOR: Duration = Duration::from_secs(600);

/// Objects known to be in an object remote (`bucket/prefix`), and since when.
static CONFIRMED: Mutex<BTreeMap<(String, Oid), Instant>> = Mutex::new(BTreeMap::new());

fn confirmed(place: &str, oid: Oid) -> bool {
    let map = CONFIRMED.lock().unwrap_or_else(|e| e.into_inner());
    map.get(&(place.to_string(), oid))
        .is_some_and(|at| at.elapsed() < CONFIRMED_FOR)
}

fn confirm(place: String, oid: Oid) {
    let mut map = CONFIRMED.lock().unwrap_or_else(|e| e.into_inner());
    if map.len() >= 100_000 {
        map.retain(|_, at| at.elapsed() < CONFIRMED_FOR);
    }
    map.insert((place, oid), Instant::now());
}

/// Links (else copies) the pool's entry to a fresh random name in `tmp`,
/// created exclusively (git-lfs renames it into place), checked against its
/// oid first (a corrupt entry is moved aside: the error says so).
async fn export(
    shared: &Arc<Shared>,
    oid: Oid,
    tmp: &Path,
) -> Result<Result<Option<PathBuf>, PoolError>, WireError> {
    let (pool, tmp) = (shared.pool.clone(), tmp.to_path_buf());
    tokio::task::spawn_blocking(move || match export_to_temp(&pool, &oid, &tmp) {
        Ok(Some(path)) => path
            .keep()
            .map(|p| Ok(Some(p)))
            .map_err(|e| WireError::new(ErrorCode::Internal, e.to_string())),
        Ok(None) => Ok(Ok(None)),
        Err(e) => Ok(Err(e)),
    })
    .await
    .map_err(internal)?
}

type Gate = Arc<tokio::sync::Mutex<()>>;

/// Downloads in flight, by object; an entry goes when its last holder does.
static IN_FLIGHT: Mutex<BTreeMap<Oid, std::sync::Weak<tokio::sync::Mutex<()>>>> =
    Mutex::new(BTreeMap::new());

/// The lock that serialises downloads of `oid` in this daemon (the only
/// writer of the pool's partial files: one daemon per socket and pool).
fn gate(oid: Oid) -> Gate {
    let mut map = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    map.retain(|_, weak| weak.strong_count() > 0);
    if let Some(gate) = map.get(&oid).and_then(std::sync::Weak::upgrade) {
        return gate;
    }
    let gate = Gate::default();
    map.insert(oid, Arc::downgrade(&gate));
    gate
}

fn remote(e: crate::remote::RemoteError) -> WireError {
    WireError::new(ErrorCode::Internal, e.to_string())
}
