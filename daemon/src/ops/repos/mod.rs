//! Registering repos: the repo book (what is watched and scanned) and the
//! foreign objects (what the repo's mirror lists) kept in step, so a repo
//! registered by any path (`drsctl repos add`, `drsctl init`, a first
//! add-url there, the daemon's start) gets back its registry entries.
//!
//! Owns the repo book (`book.rs`, saved by `state.rs`) and the per-repo
//! write locks (`locks.rs`) every writer in a repo holds.

mod book;
mod error;
mod locks;
mod state;

pub use book::RepoBook;
pub use error::RepoError;
pub use locks::{RepoGuard, RepoLocks};
pub(crate) use state::state_file;
pub use state::StateError;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::foreign::ForeignObjects;
use crate::lfs::setup::{self, SetupReport};
use crate::remote::{ObjectRemote, Remote};
use drsd_proto::RepoReport;

/// The repo-registration service.
pub struct Registrar {
    book: Arc<RepoBook>,
    foreign: Arc<ForeignObjects>,
    /// For `init`'s check that an object remote can be reached.
    remote: Arc<Remote>,
}

impl Registrar {
    pub(crate) fn new(
        book: Arc<RepoBook>,
        foreign: Arc<ForeignObjects>,
        remote: Arc<Remote>,
    ) -> Registrar {
        Registrar {
            book,
            foreign,
            remote,
        }
    }

    /// Registers the work tree containing `path` (watched and scanned) and
    /// puts back its foreign-object entries from its mirror.
    pub async fn register(&self, path: PathBuf) -> Result<RepoReport, RepoError> {
        let report = self.book.add(path).await?;
        self.foreign.restore(&report.path).await?;
        Ok(report)
    }

    /// Registers the work tree at `top` unless it is already: a registered
    /// one got its entries back at registration or at the daemon's start.
    pub async fn register_if_new(&self, top: &Path) -> Result<(), RepoError> {
        if !self.book.paths().iter().any(|p| p == top) {
            self.register(top.to_path_buf()).await?;
        }
        Ok(())
    }

    /// Unregisters `path` (as given or as its work tree's top) and stops
    /// watching it.
    pub async fn unregister(&self, path: PathBuf) -> Result<RepoReport, RepoError> {
        self.book.remove(path).await
    }

    /// Every registered repo's last report.
    pub fn list(&self) -> Vec<RepoReport> {
        self.book.reports()
    }

    /// The last report of the repo registered at `top`, if it is.
    pub fn report(&self, top: &Path) -> Option<RepoReport> {
        self.book.report(top)
    }

    /// `drsctl init`: sets the repo at `repo` up for drsd (the agent at
    /// `agent`, the object remote and Indexd) and registers it. A new
    /// object remote is checked first (the folder takes a file; the bucket
    /// exists and takes the credentials): nothing is written for one that
    /// cannot be used.
    pub async fn set_up(
        &self,
        repo: PathBuf,
        agent: PathBuf,
        settings: setup::RepoSettings,
    ) -> Result<SetupReport, RepoError> {
        if let Some(text) = &settings.remote {
            self.check_remote(text).await?;
        }
        let report = crate::blocking(move || setup::init(&repo, &agent, &settings))
            .await
            .map_err(RepoError::Setup)?;
        self.register(report.repo.clone()).await?;
        Ok(report)
    }

    /// Whether the object remote `text` can be used, else why not.
    async fn check_remote(&self, text: &str) -> Result<(), RepoError> {
        let bad = |why: String| RepoError::Unusable {
            remote: text.to_string(),
            why,
        };
        let remote = ObjectRemote::parse(text).map_err(|e| bad(e.to_string()))?;
        self.remote.check_reachable(&remote).await.map_err(bad)
    }

    /// `drsctl init --undo`: takes what `init` set up out of the repo and
    /// unregisters it.
    pub async fn take_down(&self, repo: PathBuf) -> Result<SetupReport, RepoError> {
        let report = crate::blocking(move || setup::undo(&repo))
            .await
            .map_err(RepoError::Setup)?;
        // Not registered is fine: undo is for any repo init touched.
        let _ = self.book.remove(report.repo.clone()).await;
        Ok(report)
    }

    /// At start: every saved repo gets back what its mirror lists and the
    /// registry lacks (the registry file may have been lost on its own).
    pub async fn restore_saved(&self) {
        for repo in self.book.paths() {
            if let Err(e) = self.foreign.restore(&repo).await {
                log::warn!("restoring the registry entries of {}: {e}", repo.display());
            }
        }
    }
}
