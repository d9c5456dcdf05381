//! What the git-lfs transfer agent asks: objects into and out of a repo,
//! through the pool, and to and from the repo's object remote.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::{internal, Progressor, Shared};
use crate::ipc::{ErrorCode, Progress, Reply, WireError};
use crate::lfs::scan::{git_dirs, toplevel};
use crate::lfs::setup::recorded_remote;
use crate::pool::Oid;
use crate::remote::{
    fetch_into_pool, upload_from_pool, Fetch, FetchOptions, ObjectLayout, Origin, S3Client, S3Config,
    S3Credentials, UploadOptions, Uploaded,
};

/// One S3 client for the daemon's life: it keeps connections open between
/// objects. Built on first use from the daemon's environment and the AWS
/// profile files; a failure is not kept, so fixing the setup needs no restart.
static S3: Mutex<Option<Arc<S3Client>>> = Mutex::new(None);

fn s3() -> Result<Arc<S3Client>, WireError> {
    let mut slot = S3.lock().unwrap();
    if let Some(client) = slot.as_ref() {
        return Ok(client.clone());
    }
    let bad =
        |e: crate::remote::RemoteError| WireError::new(ErrorCode::InvalidArgument, e.to_string());
    let client = S3Client::new(
        S3Config::from_env().map_err(bad)?,
        S3Credentials::from_env().map_err(bad)?,
    )
    .map_err(bad)?;
    Ok(slot.insert(Arc::new(client)).clone())
}

fn parse_oid(oid: &str) -> Result<Oid, WireError> {
    oid.parse().map_err(|e: crate::pool::PoolError| {
        WireError::new(ErrorCode::InvalidArgument, e.to_string())
    })
}

/// What a transfer needs to know about a repo, found with git once and kept
/// until the repo's `.gitattributes` (where the remote is recorded) changes:
/// thousands of small objects must not cost three git processes each.
#[derive(Clone)]
struct RepoFacts {
    /// `<common git dir>/lfs/tmp`: on the repo's filesystem, where git-lfs
    /// renames what the agent hands it.
    tmp: PathBuf,
    remote: Option<String>,
    attributes: PathBuf,
    stamp: Option<SystemTime>,
}

static FACTS: Mutex<BTreeMap<PathBuf, RepoFacts>> = Mutex::new(BTreeMap::new());

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

async fn facts(repo: &Path) -> Result<RepoFacts, WireError> {
    let cached = FACTS.lock().unwrap().get(repo).cloned();
    if let Some(facts) = cached.filter(|f| modified(&f.attributes) == f.stamp) {
        return Ok(facts);
    }
    let path = repo.to_path_buf();
    let facts = tokio::task::spawn_blocking(move || {
        let bad =
            |e: &dyn std::fmt::Display| WireError::new(ErrorCode::InvalidArgument, e.to_string());
        let top = toplevel(&path).map_err(|e| bad(&e))?;
        let tmp = git_dirs(&top)
            .map_err(|e| bad(&e))?
            .common_dir
            .join("lfs/tmp");
        std::fs::create_dir_all(&tmp).map_err(|e| {
            WireError::new(
                ErrorCode::Internal,
                format!("create {}: {e}", tmp.display()),
            )
        })?;
        let attributes = top.join(".gitattributes");
        let stamp = modified(&attributes);
        let remote = recorded_remote(&top).map_err(|e| bad(&e))?;
        Ok::<_, WireError>(RepoFacts {
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
        .unwrap()
        .insert(repo.to_path_buf(), facts.clone());
    Ok(facts)
}

/// The repo's object remote, from its committed `.gitattributes`.
fn layout(repo: &Path, facts: &RepoFacts) -> Result<ObjectLayout, WireError> {
    let url = facts.remote.as_deref().ok_or_else(|| {
        WireError::new(
            ErrorCode::InvalidArgument,
            format!(
                "{} has no object remote: record one with drsctl init --remote s3://bucket/prefix (it goes in .gitattributes)",
                repo.display()
            ),
        )
    })?;
    ObjectLayout::parse(url).map_err(|e| WireError::new(ErrorCode::InvalidArgument, e.to_string()))
}

pub(super) async fn download(
    shared: &Arc<Shared>,
    repo: PathBuf,
    oid: &str,
    size: u64,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let oid = parse_oid(oid)?;
    let facts = facts(&repo).await?;
    let tmp = facts.tmp.clone();
    // One download per object at a time: a second request (another repo's
    // pull) waits here and then finds the object in the pool.
    let gate = gate(oid);
    let _turn = gate.lock().await;
    if let Some(path) = export(shared, oid, &tmp).await? {
        return Ok(Reply::LfsObject {
            path,
            from: "pool".into(),
        });
    }
    let layout = layout(&repo, &facts)?;
    let client = s3()?;
    let key = layout.key(&oid);
    let object = format!("s3://{}/{key}", layout.bucket);
    // A large object is HEADed for its ETag, so ranges ask `If-Match` it
    // and a partial download can resume; a small one comes in one GET, its
    // sha256 checked like every download's.
    let etag = if size > FetchOptions::default().chunk {
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
        expect: Some(oid),
        md5: false,
    };
    let report = |done| {
        progress.send_now(Progress {
            stage: "download".into(),
            done,
            total: Some(size),
            message: None,
        })
    };
    fetch_into_pool(
        shared.pool.clone(),
        req,
        FetchOptions::default(),
        &report,
    )
    .await
    .map_err(|e| WireError::new(ErrorCode::Internal, e.to_string()))?;
    let path = export(shared, oid, &tmp).await?.ok_or_else(|| {
        WireError::new(
            ErrorCode::Internal,
            format!("object {oid} left the pool right after its download"),
        )
    })?;
    Ok(Reply::LfsObject {
        path,
        from: "remote".into(),
    })
}

pub(super) async fn upload(
    shared: &Arc<Shared>,
    repo: PathBuf,
    oid: &str,
    size: u64,
    path: PathBuf,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let oid = parse_oid(oid)?;
    let layout = layout(&repo, &facts(&repo).await?)?;
    let pool = shared.pool.clone();
    // The pool's copy is verified already: only a new object is hashed and adopted.
    let len = tokio::task::spawn_blocking(move || match pool.size(&oid)? {
        Some(len) => Ok(len),
        None => pool.adopt_file(&path, Some(&oid)).map(|put| put.len),
    })
    .await
    .map_err(internal)?
    .map_err(|e| WireError::new(ErrorCode::InvalidArgument, e.to_string()))?;
    if len != size {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            format!("object {oid} has {len} bytes, the pointer says {size}"),
        ));
    }
    let client = s3()?;
    let uploaded = upload_from_pool(
        &client,
        shared.pool.clone(),
        &layout,
        &oid,
        UploadOptions::default(),
    )
    .await
    .map_err(|e| WireError::new(ErrorCode::Internal, e.to_string()))?;
    progress
        .send(Progress {
            stage: "upload".into(),
            done: size,
            total: Some(size),
            message: None,
        })
        .await;
    Ok(Reply::LfsUploaded {
        skipped: matches!(uploaded, Uploaded::Skipped(_)),
    })
}

/// Links (else copies) the pool's entry to a fresh name in `tmp`.
async fn export(shared: &Arc<Shared>, oid: Oid, tmp: &Path) -> Result<Option<PathBuf>, WireError> {
    let pool = shared.pool.clone();
    let dest = tmp.join(format!(
        "drs-{oid}-{}-{}",
        std::process::id(),
        next_suffix()
    ));
    tokio::task::spawn_blocking(move || match pool.export(&oid, &dest) {
        Ok(Some(_)) => Ok(Some(dest)),
        Ok(None) => Ok(None),
        Err(e) => Err(WireError::new(ErrorCode::Internal, e.to_string())),
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
    let mut map = IN_FLIGHT.lock().unwrap();
    map.retain(|_, weak| weak.strong_count() > 0);
    if let Some(gate) = map.get(&oid).and_then(std::sync::Weak::upgrade) {
        return gate;
    }
    let gate = Gate::default();
    map.insert(oid, Arc::downgrade(&gate));
    gate
}

/// Distinct names for concurrent exports of one object.
fn next_suffix() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn remote(e: crate::remote::RemoteError) -> WireError {
    WireError::new(ErrorCode::Internal, e.to_string())
}
