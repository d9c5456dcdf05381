//! Objects handed to git around the pool: when the pool cannot take an
//! object (its disk is full), the download goes straight into the repo's
//! `lfs/tmp`, hashed as it is written, and is handed on only when its
//! sha256 is the pointer's. The pool is a cache: a full one must not stop
//! a clone or a `git lfs pull` when the repo's disk has room.

use std::path::Path;

use super::{fetch_error, RepoFacts, Transfers};
use crate::blocking;
use crate::lfs::hydrate::place_file;
use crate::lfs::{Hydrated, Pointer};
use crate::ops::repos::RepoLocks;
use drsd_proto::{ErrorCode, WireError};

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
        full: &WireError,
        report: &(dyn Fn(u64) + Sync),
    ) -> Result<tempfile::TempPath, WireError> {
        log::warn!(
            "object {}: the pool cannot take it ({}); fetching it straight into {}",
            pointer.oid,
            full.message,
            facts.tmp.display()
        );
        let both = |e: WireError| {
            WireError::new(
                e.code,
                format!(
                    "{}; and fetched straight into {}: {}",
                    full.message,
                    facts.tmp.display(),
                    e.message
                ),
            )
        };
        let objects = facts.object_remote(repo).map_err(both)?;
        self.remote
            .fetch_pointed_into(&objects, pointer.oid, pointer.size, &facts.tmp, report)
            .await
            .map_err(|e| both(fetch_error(e)))
    }

    /// [`Transfers::fetch_around_pool`], then the file renamed into the
    /// repo's `.git/lfs/objects`, where git-lfs checks it out from.
    pub(super) async fn hydrate_around_pool(
        &self,
        locks: &RepoLocks,
        repo: &Path,
        facts: &RepoFacts,
        pointer: Pointer,
        full: &WireError,
    ) -> Result<HydratedFrom, WireError> {
        let file = self
            .fetch_around_pool(repo, facts, pointer, full, &|_| {})
            .await?;
        // A write in the repo's `.git`: one writer at a time.
        let _writing = locks.lock(&facts.top).await;
        let lfs = facts.lfs.clone();
        let placed = blocking(move || place_file(&lfs, &pointer.oid, pointer.size, file)).await;
        match placed {
            Ok(Hydrated::Present) => Ok(HydratedFrom::Present),
            Ok(_) => Ok(HydratedFrom::Remote),
            Err(e) => Err(crate::server::wire_error::wire_error(
                ErrorCode::Internal,
                &e,
            )),
        }
    }
}
