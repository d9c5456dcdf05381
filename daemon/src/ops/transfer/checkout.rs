//! Checking out a clone's Git LFS files from the pool (`drsctl clone`,
//! after git has checked them out as pointers): the work of
//! [`crate::lfs::checkout`], under the repo's write lock.

use std::path::Path;

use super::TransferError;
use super::Transfers;
use crate::blocking;
use crate::lfs::checkout::{check_out, index_pointers};
use drsd_proto::{CheckOutReport, PathProblem};

impl Transfers {
    /// Replaces the pointer files of `repo`'s index with their objects from
    /// the pool; those it cannot fill are removed for git-lfs to check out.
    pub(crate) async fn check_out(&self, repo: &Path) -> Result<CheckOutReport, TransferError> {
        let started = std::time::Instant::now();
        let facts = self.facts(repo).await?;
        let _writing = self.locks.lock(&facts.top).await;
        let (pool, top) = (self.pool.clone(), facts.top.clone());
        let done = blocking(move || {
            let repo = crate::git::Repo::locate(&top)?;
            let entries = index_pointers(&repo.top)?;
            check_out(&repo, &pool, &entries)
        })
        .await
        .map_err(TransferError::Pointers)?;
        log::info!(
            "check-out {}: {} files ({} bytes) from the pool, {} left to git-lfs, {} left as they were, in {:.2} s",
            repo.display(),
            done.written,
            done.bytes,
            done.to_git.len(),
            done.left.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(CheckOutReport {
            written: done.written,
            bytes: done.bytes,
            to_git: done.to_git,
            left: done
                .left
                .into_iter()
                .map(|(path, why)| PathProblem { path, why })
                .collect(),
            stamps: done.stamps,
        })
    }
}
