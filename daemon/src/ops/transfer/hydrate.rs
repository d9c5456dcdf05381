//! Hydration of a repo: the objects of HEAD's pointers into its
//! `.git/lfs/objects`, from the pool, else fetched from the repo's object
//! remote into the pool first, many at a time. `drsctl clone` asks this
//! before git-lfs checks the files out, so git-lfs transfers nothing.

use std::path::Path;

use futures_util::stream::{self, StreamExt};

use super::{and_from_remote, internal, left_the_pool, RepoFacts, Transfers, PARALLEL};
use crate::blocking;
use crate::lfs::{head_pointers, hydrate, Hydrated, Pointer};
use crate::pool::PoolError;
use crate::server::RepoLocks;
use drsd_proto::{ErrorCode, HydrateReport, ObjectProblem, WireError};

/// Where a hydrated object came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HydratedFrom {
    /// The repo had it already.
    Present,
    Pool,
    Remote,
}

impl Transfers {
    /// Hydrates every object of HEAD's pointers, `PARALLEL` at a time;
    /// `progress(done, total)` after each. Writes in the repo's `.git` take
    /// its lock in `locks`.
    pub(crate) async fn hydrate_repo(
        &self,
        locks: &RepoLocks,
        repo: &Path,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<HydrateReport, WireError> {
        let started = std::time::Instant::now();
        let facts = self.facts(repo).await?;
        let pointers = {
            let repo = repo.to_path_buf();
            blocking(move || head_pointers(&repo)).await.map_err(|e| {
                crate::server::wire_error::wire_error(ErrorCode::InvalidArgument, &e)
            })?
        };
        let total = pointers.len() as u64;
        let mut report = HydrateReport {
            objects: total,
            ..HydrateReport::default()
        };
        let mut results = stream::iter(pointers)
            .map(|pointer| {
                let facts = &facts;
                async move {
                    let oid = pointer.oid;
                    (oid, self.hydrate_object(locks, repo, facts, pointer).await)
                }
            })
            .buffer_unordered(PARALLEL);
        let mut done = 0;
        while let Some((oid, outcome)) = results.next().await {
            match outcome {
                Ok(HydratedFrom::Present) => report.present += 1,
                Ok(HydratedFrom::Pool) => report.from_pool += 1,
                Ok(HydratedFrom::Remote) => report.downloaded += 1,
                Err(e) => report.failed.push(ObjectProblem {
                    oid,
                    why: e.message,
                }),
            }
            done += 1;
            progress(done, total);
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
        Ok(report)
    }

    /// One object into the repo's `.git/lfs/objects`: from the pool, else
    /// from the object remote. A pool entry found corrupt on its way out
    /// has been moved aside: the object is fetched as if the pool never had
    /// it, and if that fails too, the error says both.
    pub(crate) async fn hydrate_object(
        &self,
        locks: &RepoLocks,
        repo: &Path,
        facts: &RepoFacts,
        pointer: Pointer,
    ) -> Result<HydratedFrom, WireError> {
        let place = || async {
            // A write in the repo's `.git`: one writer at a time.
            let _writing = locks.lock(&facts.top).await;
            let (pool, lfs) = (self.pool.clone(), facts.lfs.clone());
            blocking(move || hydrate(&pool, &lfs, &pointer.oid, pointer.size)).await
        };
        let corrupt = match place().await {
            Ok(Hydrated::Present) => return Ok(HydratedFrom::Present),
            Ok(Hydrated::Placed) => return Ok(HydratedFrom::Pool),
            Ok(Hydrated::NotInPool) => None,
            Err(e @ PoolError::Corrupt { .. }) => Some(e),
            Err(e) => return Err(internal(e)),
        };
        let fetched = self
            .fetch(repo, facts, pointer.oid, pointer.size, &|_| {})
            .await;
        if let (Err(e), Some(corrupt)) = (&fetched, &corrupt) {
            return Err(and_from_remote(corrupt, e));
        }
        fetched?;
        match place().await.map_err(internal)? {
            Hydrated::NotInPool => Err(left_the_pool(pointer.oid)),
            _ => Ok(HydratedFrom::Remote),
        }
    }
}
