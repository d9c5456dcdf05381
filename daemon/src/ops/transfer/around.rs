//! Objects handed to git around the pool: when the pool cannot take an
//! object (its disk is full), the download goes straight into the repo's
//! `lfs/tmp`, hashed as it is written, and is handed on only when its
//! sha256 is the pointer's. The pool is a cache: a full one must not stop
//! a clone or a `git lfs pull` when the repo's disk has room.

use std::path::Path;

use super::{RepoFacts, TransferError, Transfers};
use crate::blocking;
use crate::lfs::hydrate::place_file;
use crate::lfs::{Hydrated, Pointer};

use super::hydrate::HydratedFrom;

impl Transfers {
    /// Object `oid` of `size` bytes from the repo's object remote into a
    /// fresh, verified file in its `lfs/tmp`, after the pool refused it
    /// with `full` (a `no_space` error). Should this fail too, the error
    /// says both.
    pub(super) async fn fetch_around_pool(
        &self,
        repo: &Path,
        facts: &RepoFacts,
        pointer: Pointer,
        full: TransferError,
        report: &(dyn Fn(u64) + Sync),
    ) -> Result<tempfile::TempPath, TransferError> {
        log::warn!(
            "object {}: the pool cannot take it ({full}); fetching it straight into {}",
            pointer.oid,
            facts.tmp.display()
        );
        let fetched = match facts.object_remote(repo) {
            Ok(objects) => self
                .remote
                .fetch_pointed_into(&objects, pointer.oid, pointer.size, &facts.tmp, report)
                .await
                .map_err(TransferError::Fetch),
            Err(e) => Err(e),
        };
        fetched.map_err(|then| TransferError::AroundPool {
            full: Box::new(full),
            tmp: facts.tmp.clone(),
            then: Box::new(then),
        })
    }

    /// [`Transfers::fetch_around_pool`], then the file renamed into the
    /// repo's `.git/lfs/objects`, where git-lfs checks it out from.
    pub(super) async fn hydrate_around_pool(
        &self,
        repo: &Path,
        facts: &RepoFacts,
        pointer: Pointer,
        full: TransferError,
    ) -> Result<HydratedFrom, TransferError> {
        let file = self
            .fetch_around_pool(repo, facts, pointer, full, &|_| {})
            .await?;
        // A write in the repo's `.git`: one writer at a time.
        let _writing = self.locks.lock(&facts.top).await;
        let lfs = facts.lfs.clone();
        let placed = blocking(move || place_file(&lfs, &pointer.oid, pointer.size, file)).await;
        match placed {
            Ok(Hydrated::Present) => Ok(HydratedFrom::Present),
            Ok(_) => Ok(HydratedFrom::Remote),
            Err(e) => Err(TransferError::Pool(e)),
        }
    }
}
