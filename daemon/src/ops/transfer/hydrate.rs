//! Hydration of a repo: the objects of HEAD's pointers into its
//! `.git/lfs/objects`, from the pool, else fetched from the repo's object
//! remote into the pool first, many at a time. `drsctl clone` asks this
//! before git-lfs checks the files out, so git-lfs transfers nothing.

use std::path::Path;

use futures_util::stream::{self, StreamExt};

use super::{RepoFacts, TransferError, Transfers, PARALLEL, SMALL_BATCH};
use crate::blocking;
use crate::lfs::hydrate::place_bytes;
use crate::lfs::{head_pointers, hydrate, Hydrated, Pointer};
use crate::pool::{Oid, Pool, PoolError, Tier};
use drsd_proto::{HydrateReport, ObjectProblem};

/// Where a hydrated object came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HydratedFrom {
    /// The repo had it already.
    Present,
    Pool,
    Remote,
}

impl Transfers {
    /// Hydrates every object of HEAD's pointers; `progress(done, total)`
    /// as they land. Writes in the repo's `.git` take its write lock.
    ///
    /// First one pass over the pool (what the repo or the pool has). Then
    /// the small objects neither has are read into memory from the object
    /// remote, `PARALLEL` at a time, in batches of `SMALL_BATCH`: each batch
    /// goes into the pool in one transaction and into `.git/lfs/objects`
    /// from memory (not read back out of the pool). The rest (large ones,
    /// corrupt pool entries, objects the object remote does not give whole)
    /// take the full path of [`Transfers::hydrate_object`], `PARALLEL` at a
    /// time.
    pub(crate) async fn hydrate_repo(
        &self,
        repo: &Path,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<HydrateReport, TransferError> {
        let started = std::time::Instant::now();
        let facts = self.facts(repo).await?;
        let pointers = {
            let repo = repo.to_path_buf();
            blocking(move || head_pointers(&repo))
                .await
                .map_err(TransferError::Pointers)?
        };
        let total = pointers.len() as u64;
        let report = HydrateReport {
            objects: total,
            ..HydrateReport::default()
        };
        let tally = Tally {
            state: std::sync::Mutex::new((report, 0)),
            total,
            progress,
        };
        // What the repo or the pool has, in one pass under the lock.
        let placed = {
            let _writing = self.locks.lock(&facts.top).await;
            let (pool, lfs) = (self.pool.clone(), facts.lfs.clone());
            blocking(move || {
                pointers
                    .into_iter()
                    .map(|p| (p, hydrate(&pool, &lfs, &p.oid, p.size)))
                    .collect::<Vec<_>>()
            })
            .await
        };
        let objects = facts.object_remote(repo).ok();
        let (mut small, mut rest) = (Vec::new(), Vec::new());
        for (pointer, outcome) in placed {
            match outcome {
                Ok(Hydrated::Present) => tally.add(pointer.oid, Ok(HydratedFrom::Present)),
                Ok(Hydrated::Placed) => tally.add(pointer.oid, Ok(HydratedFrom::Pool)),
                Ok(Hydrated::NotInPool)
                    if objects.is_some() && self.pool.tier_for(pointer.size) == Tier::Kv =>
                {
                    small.push(pointer)
                }
                // A corrupt entry (moved aside) or none: the full path.
                Ok(Hydrated::NotInPool) => rest.push((pointer, None)),
                Err(e @ PoolError::Corrupt { .. }) => rest.push((pointer, Some(e))),
                Err(e) => tally.add(pointer.oid, Err(TransferError::Pool(e))),
            }
        }
        // The small ones in batches beside the rest (a large object's
        // download runs while the small ones arrive).
        let batched = async {
            let mut missed = Vec::new();
            let Some(objects) = &objects else {
                return missed;
            };
            for batch in small.chunks(SMALL_BATCH) {
                let fetched: Vec<(Pointer, Option<Vec<u8>>)> =
                    stream::iter(batch.iter().copied())
                        .map(|p| async move {
                            (p, self.remote.read_small(objects, p.oid, p.size).await)
                        })
                        .buffer_unordered(PARALLEL)
                        .collect()
                        .await;
                let mut got = Vec::with_capacity(fetched.len());
                for (pointer, bytes) in fetched {
                    match bytes {
                        Some(bytes) => got.push((pointer.oid, bytes)),
                        None => missed.push((pointer, None)),
                    }
                }
                let _writing = self.locks.lock(&facts.top).await;
                let (pool, lfs) = (self.pool.clone(), facts.lfs.clone());
                let outcomes = blocking(move || place_batch(&pool, &lfs, got)).await;
                drop(_writing);
                for (oid, outcome) in outcomes {
                    tally.add(
                        oid,
                        outcome
                            .map(|()| HydratedFrom::Remote)
                            .map_err(TransferError::Pool),
                    );
                }
            }
            missed
        };
        let (missed, ()) = tokio::join!(
            batched,
            self.hydrate_each(repo, &facts, std::mem::take(&mut rest), &tally)
        );
        // What the object remote did not give whole: the full path says why.
        self.hydrate_each(repo, &facts, missed, &tally).await;
        let (report, _) = tally.state.into_inner().unwrap_or_else(|e| e.into_inner());
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

    /// [`Transfers::hydrate_object`] for each of `pointers` (with the
    /// corrupt pool entry found for it, if one was), `PARALLEL` at a time.
    async fn hydrate_each(
        &self,
        repo: &Path,
        facts: &RepoFacts,
        pointers: Vec<(Pointer, Option<PoolError>)>,
        tally: &Tally<'_>,
    ) {
        let mut results = stream::iter(pointers)
            .map(|(pointer, corrupt)| async move {
                let oid = pointer.oid;
                let outcome = self.hydrate_object(repo, facts, pointer, corrupt).await;
                (oid, outcome)
            })
            .buffer_unordered(PARALLEL);
        while let Some((oid, outcome)) = results.next().await {
            tally.add(oid, outcome);
        }
    }

    /// One object into the repo's `.git/lfs/objects`: from the pool, else
    /// from the object remote. A pool entry found corrupt on its way out
    /// has been moved aside (`corrupt`: one found so already): the object is
    /// fetched as if the pool never had it, and if that fails too, the error
    /// says both.
    pub(crate) async fn hydrate_object(
        &self,
        repo: &Path,
        facts: &RepoFacts,
        pointer: Pointer,
        corrupt: Option<PoolError>,
    ) -> Result<HydratedFrom, TransferError> {
        let place = || async {
            // A write in the repo's `.git`: one writer at a time.
            let _writing = self.locks.lock(&facts.top).await;
            let (pool, lfs) = (self.pool.clone(), facts.lfs.clone());
            blocking(move || hydrate(&pool, &lfs, &pointer.oid, pointer.size)).await
        };
        let corrupt = match corrupt {
            Some(known) => Some(known),
            None => match place().await {
                Ok(Hydrated::Present) => return Ok(HydratedFrom::Present),
                Ok(Hydrated::Placed) => return Ok(HydratedFrom::Pool),
                Ok(Hydrated::NotInPool) => None,
                Err(e @ PoolError::Corrupt { .. }) => Some(e),
                Err(e) => return Err(TransferError::Pool(e)),
            },
        };
        let fetched = self
            .fetch(repo, facts, pointer.oid, pointer.size, &|_| {})
            .await;
        match (fetched, corrupt) {
            (Err(then), Some(corrupt)) => {
                return Err(TransferError::Refetch {
                    corrupt,
                    then: Box::new(then),
                })
            }
            // The pool is a cache: the repo gets the bytes around it.
            (Err(full), None) if full.is_out_of_space() => {
                return self.hydrate_around_pool(repo, facts, pointer, full).await;
            }
            (fetched, _) => fetched?,
        };
        match place().await.map_err(TransferError::Pool)? {
            Hydrated::NotInPool => Err(TransferError::LeftThePool { oid: pointer.oid }),
            _ => Ok(HydratedFrom::Remote),
        }
    }
}

/// The report as objects land, shared by the batches and the rest.
struct Tally<'a> {
    state: std::sync::Mutex<(HydrateReport, u64)>,
    total: u64,
    progress: &'a (dyn Fn(u64, u64) + Sync),
}

impl Tally<'_> {
    fn add(&self, oid: Oid, outcome: Result<HydratedFrom, TransferError>) {
        let mut state = crate::lock::lock(&self.state);
        let (report, done) = &mut *state;
        match outcome {
            Ok(HydratedFrom::Present) => report.present += 1,
            Ok(HydratedFrom::Pool) => report.from_pool += 1,
            Ok(HydratedFrom::Remote) => report.downloaded += 1,
            Err(e) => report.failed.push(ObjectProblem {
                oid,
                why: e.to_string(),
            }),
        }
        *done += 1;
        (self.progress)(*done, self.total);
    }
}

/// One batch of small objects, each already checked against its oid: into
/// the pool in one transaction, then into `lfs/objects` from memory. The
/// pool is a cache: when it cannot take them the repo still gets them.
fn place_batch(
    pool: &Pool,
    lfs: &Path,
    got: Vec<(Oid, Vec<u8>)>,
) -> Vec<(Oid, Result<(), PoolError>)> {
    let entries: Vec<(Oid, &[u8])> = got.iter().map(|(oid, b)| (*oid, b.as_slice())).collect();
    if let Err(e) = pool.put_many(&entries) {
        log::warn!(
            "{} fetched objects could not go into the pool ({e}); the repo gets them all the same",
            entries.len()
        );
    }
    got.iter()
        .map(|(oid, bytes)| (*oid, place_bytes(lfs, oid, bytes).map(|_| ())))
        .collect()
}
