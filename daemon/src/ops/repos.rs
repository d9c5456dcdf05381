//! Registering repos: the repo book (what is watched and scanned) and the
//! foreign objects (what the repo's mirror lists) kept in step, so a repo
//! registered by any path (`drsctl repos add`, `drsctl init`, a first
//! add-url there, the daemon's start) gets back its registry entries.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::foreign::ForeignObjects;
use crate::lfs::setup::{self, SetupReport};
use crate::remote::{ObjectRemote, Remote};
use crate::server::RepoBook;
use drsd_proto::{ErrorCode, RepoReport, WireError};

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
    pub async fn register(&self, path: PathBuf) -> Result<RepoReport, WireError> {
        let report = self.book.add(path).await?;
        self.foreign.restore(&report.path).await?;
        Ok(report)
    }

    /// Registers the work tree at `top` unless it is already: a registered
    /// one got its entries back at registration or at the daemon's start.
    pub async fn register_if_new(&self, top: &Path) -> Result<(), WireError> {
        if !self.book.paths().iter().any(|p| p == top) {
            self.register(top.to_path_buf()).await?;
        }
        Ok(())
    }

    /// Unregisters `path` (as given or as its work tree's top) and stops
    /// watching it.
    pub async fn unregister(&self, path: PathBuf) -> Result<RepoReport, WireError> {
        self.book.remove(path).await
    }

    /// Every registered repo's last report.
    pub fn list(&self) -> Vec<RepoReport> {
        self.book.reports()
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
    ) -> Result<SetupReport, WireError> {
        if let Some(text) = &settings.remote {
            self.check_remote(text).await?;
        }
        let report = crate::blocking(move || setup::init(&repo, &agent, &settings))
            .await
            .map_err(|e| crate::server::wire_error::wire_error(ErrorCode::InvalidArgument, &e))?;
        self.register(report.repo.clone()).await?;
        Ok(report)
    }

    /// Whether the object remote `text` can be used, else why not.
    async fn check_remote(&self, text: &str) -> Result<(), WireError> {
        let bad = |why: String| {
            WireError::new(
                ErrorCode::InvalidArgument,
                format!("object remote {text}: {why}; nothing was changed"),
            )
        };
        let remote = ObjectRemote::parse(text).map_err(|e| bad(e.to_string()))?;
        self.remote
            .check_reachable(&remote)
            .await
            .map_err(|e| bad(e.to_string()))
    }

    /// `drsctl init --undo`: takes what `init` set up out of the repo and
    /// unregisters it.
    pub async fn take_down(&self, repo: PathBuf) -> Result<SetupReport, WireError> {
        let report = crate::blocking(move || setup::undo(&repo))
            .await
            .map_err(|e| crate::server::wire_error::wire_error(ErrorCode::InvalidArgument, &e))?;
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
