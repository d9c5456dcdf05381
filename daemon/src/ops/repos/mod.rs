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
use crate::lfs::setup::{self, parse_authz, parse_indexd, RepoSettings, SetupReport};
use crate::remote::{ObjectRemote, Remote};
use drsd_proto::RepoReport;

/// What `drsctl init` asked for, as the client sent it.
pub struct SetupAsk {
    pub remote: Option<String>,
    pub indexd: Option<String>,
    pub authz: Option<String>,
    /// `--no-remote`: take the recorded object remote out.
    pub forget_remote: bool,
}

/// What `drsctl init` asked for, checked: an object remote of a known kind
/// and well formed, an Indexd base URL, resource paths.
pub struct SetupPlan {
    remote: Option<ObjectRemote>,
    indexd: Option<url::Url>,
    authz: Vec<String>,
    forget_remote: bool,
}

impl SetupAsk {
    /// Checks every setting, so one that is wrong is refused before
    /// anything changes (and before `--undo` too).
    pub fn check(self) -> Result<SetupPlan, RepoError> {
        let remote = match self.remote {
            Some(text) => Some(ObjectRemote::parse(&text).map_err(RepoError::RemoteText)?),
            None => None,
        };
        let indexd = match self.indexd {
            Some(text) => Some(parse_indexd(&text).ok_or(RepoError::IndexdText(text))?),
            None => None,
        };
        let authz = match self.authz {
            Some(text) => parse_authz(&text).ok_or(RepoError::AuthzText(text))?,
            None => Vec::new(),
        };
        // A commons needs the project its records go to.
        let gen3 = matches!(remote, Some(ObjectRemote::Gen3(_)));
        if gen3 && crate::remote::project_of(&authz).is_none() {
            return Err(RepoError::Gen3WithoutProject);
        }
        Ok(SetupPlan {
            remote,
            indexd,
            authz,
            forget_remote: self.forget_remote,
        })
    }
}

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

    /// The registered repos' top folders.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.book.paths()
    }

    /// Scans `repo` again (a watch event, the poll timer).
    pub async fn rescan(&self, repo: &Path) {
        self.book.rescan(repo).await
    }

    /// The repos the poll timer rescans: see [`RepoBook::due_for_poll`].
    pub fn due_for_poll(&self) -> Vec<PathBuf> {
        self.book.due_for_poll()
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
        plan: SetupPlan,
    ) -> Result<SetupReport, RepoError> {
        if let Some(remote) = &plan.remote {
            self.check_remote(remote).await?;
        }
        // A folder remote is recorded as its `file://` URL.
        let settings = RepoSettings {
            remote: plan.remote.map(|r| r.url()),
            indexd: plan.indexd,
            authz: plan.authz,
            forget_remote: plan.forget_remote,
        };
        let report = crate::blocking(move || setup::init(&repo, &agent, &settings))
            .await
            .map_err(RepoError::Setup)?;
        self.register(report.repo.clone()).await?;
        Ok(report)
    }

    /// Whether the object remote `remote` can be used, else why not.
    async fn check_remote(&self, remote: &ObjectRemote) -> Result<(), RepoError> {
        let checked = self.remote.check_reachable(remote).await;
        checked.map_err(|why| RepoError::Unusable {
            remote: remote.url(),
            why: why.to_string(),
        })
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
