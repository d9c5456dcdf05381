//! `hydrate`: the objects of HEAD's pointers into the repo's
//! `.git/lfs/objects`, from the pool, else fetched from the repo's object
//! remote into the pool first, many at a time. `drsctl clone` asks this
//! before git-lfs checks the files out, so git-lfs transfers nothing.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use super::lfs::{facts, fetch_object, RepoFacts};
use super::push::PARALLEL;
use super::{internal, Progressor, Shared};
use crate::ipc::{ErrorCode, HydrateReport, ObjectProblem, Progress, Reply, WireError};
use crate::lfs::{head_pointers, hydrate, Hydrated, Pointer};
use crate::pool::PoolError;

/// Where an object came from.
enum Source {
    Present,
    Pool,
    Remote,
}

pub(super) async fn handle(
    shared: &Arc<Shared>,
    repo: PathBuf,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let started = std::time::Instant::now();
    let facts = facts(&repo).await?;
    let pointers = {
        let repo = repo.clone();
        tokio::task::spawn_blocking(move || head_pointers(&repo))
            .await
            .map_err(internal)?
            .map_err(|e| crate::server::wire_error::wire_error(ErrorCode::InvalidArgument, &e))?
    };
    let total = pointers.len() as u64;
    let mut report = HydrateReport {
        objects: total,
        ..HydrateReport::default()
    };
    let mut results = stream::iter(pointers)
        .map(|pointer| {
            let (repo, facts) = (&repo, &facts);
            async move { (pointer.oid, one(shared, repo, facts, pointer).await) }
        })
        .buffer_unordered(PARALLEL);
    let mut done = 0;
    while let Some((oid, outcome)) = results.next().await {
        match outcome {
            Ok(Source::Present) => report.present += 1,
            Ok(Source::Pool) => report.from_pool += 1,
            Ok(Source::Remote) => report.downloaded += 1,
            Err(e) => report.failed.push(ObjectProblem {
                oid,
                why: e.message,
            }),
        }
        done += 1;
        progress.send_now(Progress {
            stage: crate::ipc::Stage::Hydrate,
            done,
            total: Some(total),
            message: None,
        });
    }
    log::info!(
        "hydrate {}: {} objects, {} present, {} from the pool, {} downloaded, {} failed, in {:.2} s",
        repo.display(),
        report.objects,
        report.present,
        report.from_pool,
        report.downloaded,
        report.failed.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(Reply::Hydrated(report))
}

/// From the pool, else from the object remote. A pool entry found corrupt
/// on its way out has been moved aside: the object is fetched as if the
/// pool never had it, and if that fails too, the error says both.
async fn one(
    shared: &Arc<Shared>,
    repo: &std::path::Path,
    facts: &RepoFacts,
    pointer: Pointer,
) -> Result<Source, WireError> {
    let place = || {
        let (pool, lfs) = (shared.pool.clone(), facts.lfs.clone());
        async move {
            // A write in the repo's `.git`: one writer at a time.
            let _writing = shared.repo_locks.lock(&facts.top).await;
            tokio::task::spawn_blocking(move || hydrate(&pool, &lfs, &pointer.oid, pointer.size))
                .await
                .map_err(internal)
        }
    };
    let corrupt = match place().await? {
        Ok(Hydrated::Present) => return Ok(Source::Present),
        Ok(Hydrated::Placed) => return Ok(Source::Pool),
        Ok(Hydrated::NotInPool) => None,
        Err(e @ PoolError::Corrupt { .. }) => Some(e),
        Err(e) => return Err(internal(e)),
    };
    let fetched = fetch_object(shared, repo, facts, pointer.oid, pointer.size, &|_| {}).await;
    if let (Err(e), Some(corrupt)) = (&fetched, &corrupt) {
        return Err(WireError::new(
            e.code,
            format!("{corrupt}; and from the object remote: {}", e.message),
        ));
    }
    fetched?;
    match place().await?.map_err(internal)? {
        Hydrated::NotInPool => Err(WireError::new(
            ErrorCode::Internal,
            format!(
                "object {} left the pool right after its download",
                pointer.oid
            ),
        )),
        _ => Ok(Source::Remote),
    }
}
