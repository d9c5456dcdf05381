//! The repo book: the registered repos, their watch state and last scan,
//! saved across restarts (`state.rs`). Registering a repo's foreign objects
//! along with it is `ops::repos`'s.
//!
//! Scans run one at a time (`scan_lock`), so a slow older scan can never
//! overwrite a newer one's result; the lock holds each repo's last scanned
//! HEAD pointers, which a rescan of the same HEAD need not read again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::blocking;
use crate::git::Repo;
use crate::lfs::scan::{locate_registered, scan_in, HeadPointers, ScanError};
use crate::pool::Pool;
use crate::watch::Watcher;
use drsd_proto::{RepoReport, RepoState, ScanReport};

use super::state::{self, StateError};
use super::RepoError;

pub struct RepoBook {
    inner: Mutex<Inner>,
    scan_lock: tokio::sync::Mutex<BTreeMap<PathBuf, HeadPointers>>,
    state_file: PathBuf,
    pool: Arc<Pool>,
}

struct Inner {
    repos: BTreeMap<PathBuf, RepoReport>,
    watcher: Watcher,
}

impl RepoBook {
    /// The book with the repos saved in `state_file`, none scanned or watched yet.
    pub fn load(
        state_file: PathBuf,
        pool: Arc<Pool>,
        watcher: Watcher,
    ) -> Result<RepoBook, StateError> {
        let repos = state::load(&state_file)?
            .into_iter()
            .map(|path| (path.clone(), fresh(path)))
            .collect();
        Ok(RepoBook {
            inner: Mutex::new(Inner { repos, watcher }),
            scan_lock: tokio::sync::Mutex::new(BTreeMap::new()),
            state_file,
            pool,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        crate::lock::lock(&self.inner)
    }

    pub fn paths(&self) -> Vec<PathBuf> {
        self.lock().repos.keys().cloned().collect()
    }

    /// Every repo's last report. No file system access here: status must stay
    /// fast with many repos; a repo moved away without its watches seeing it
    /// is found by the poll timer (`due_for_poll`).
    pub fn reports(&self) -> Vec<RepoReport> {
        self.lock().repos.values().cloned().collect()
    }

    /// Registers the work tree containing `path`, watches and scans it.
    pub async fn add(&self, path: PathBuf) -> Result<RepoReport, RepoError> {
        let top = blocking(move || Repo::locate(&path).map(|repo| repo.top))
            .await
            .map_err(RepoError::NotInRepo)?;
        let added = {
            let mut inner = self.lock();
            let added = !inner.repos.contains_key(&top);
            if added {
                inner.repos.insert(top.clone(), fresh(top.clone()));
                self.save(&inner).inspect_err(|_| {
                    inner.repos.remove(&top);
                })?;
            }
            added
        };
        if added {
            log::info!("registered repo {}", top.display());
        }
        self.rescan(&top).await;
        self.report(&top).ok_or_else(|| not_registered(&top))
    }

    /// Unregisters `path` (as given or as its work tree's top) and stops watching it.
    pub async fn remove(&self, path: PathBuf) -> Result<RepoReport, RepoError> {
        let key = self.find(&path).ok_or_else(|| not_registered(&path))?;
        let mut inner = self.lock();
        let report = inner
            .repos
            .remove(&key)
            .ok_or_else(|| not_registered(&path))?;
        if let Err(e) = self.save(&inner) {
            inner.repos.insert(key, report);
            return Err(e);
        }
        inner.watcher.unwatch_repo(&key);
        log::info!("unregistered repo {}", key.display());
        Ok(report)
    }

    /// The registered key for `path`: itself, its canonical form, or its
    /// work tree's top (a deleted repo can still be removed by its old path).
    fn find(&self, path: &Path) -> Option<PathBuf> {
        let inner = self.lock();
        let candidates = [
            Some(path.to_path_buf()),
            path.canonicalize().ok(),
            Repo::locate(path).ok().map(|repo| repo.top),
        ];
        candidates
            .into_iter()
            .flatten()
            .find(|p| inner.repos.contains_key(p))
    }

    /// The last report of the repo registered at `path`, if it is.
    pub fn report(&self, path: &Path) -> Option<RepoReport> {
        self.lock().repos.get(path).cloned()
    }

    fn save(&self, inner: &Inner) -> Result<(), RepoError> {
        let paths: Vec<PathBuf> = inner.repos.keys().cloned().collect();
        state::save(&self.state_file, &paths).map_err(RepoError::Save)
    }

    /// Scans `repo` again and updates its report and watch.
    pub async fn rescan(&self, repo: &Path) {
        let mut heads = self.scan_lock.lock().await;
        let mut known = heads.remove(repo).unwrap_or_default();
        if self.report(repo).is_none() {
            return; // removed meanwhile
        }
        let (pool, path) = (self.pool.clone(), repo.to_path_buf());
        let (scanned, known) = blocking(move || {
            let scanned = locate_registered(&path).and_then(|dirs| {
                let scan = scan_in(&path, &dirs, &pool, &mut known)?;
                Ok::<_, ScanError>((dirs, scan))
            });
            (scanned, known)
        })
        .await;
        heads.insert(repo.to_path_buf(), known);
        self.lock().apply(repo, scanned);
    }

    /// Repos to rescan on the timer: not watched, missing (they may be
    /// back), failed, or no longer there.
    pub fn due_for_poll(&self) -> Vec<PathBuf> {
        let inner = self.lock();
        inner
            .repos
            .iter()
            .filter(|(path, r)| r.state != RepoState::Watching || !path.join(".git").exists())
            .map(|(path, _)| path.clone())
            .collect()
    }
}

impl Inner {
    fn apply(&mut self, repo: &Path, scanned: Result<(Repo, ScanReport), ScanError>) {
        match scanned {
            Ok((dirs, scan)) => self.scanned(repo, &dirs, scan),
            Err(ScanError::Missing { why, .. }) => self.mark_missing(repo, why),
            Err(e) => {
                log::warn!("{e}");
                if let Some(r) = self.repos.get_mut(repo) {
                    r.state = RepoState::Error;
                    r.problem = Some(e.to_string());
                }
            }
        }
    }

    fn scanned(&mut self, repo: &Path, dirs: &Repo, scan: ScanReport) {
        // Watch anew when first seen, after a refusal or after `lfs/objects` appeared.
        let watch = self
            .watcher
            .needs_rewatch(repo, dirs)
            .then(|| self.watcher.watch_repo(repo, dirs));
        let Some(r) = self.repos.get_mut(repo) else {
            return;
        };
        log::debug!("scanned {}: {} pointers", repo.display(), scan.pointers);
        r.scan = Some(scan);
        match watch {
            Some(Err(e)) => {
                log::warn!(
                    "{e}; rescanning {} every poll interval instead",
                    repo.display()
                );
                r.state = RepoState::Polling;
                r.problem = Some(format!("{e} (see fs.inotify.max_user_watches)"));
            }
            Some(Ok(())) | None => {
                r.state = RepoState::Watching;
                r.problem = None;
            }
        }
    }

    fn mark_missing(&mut self, repo: &Path, why: String) {
        self.watcher.unwatch_repo(repo);
        if let Some(r) = self.repos.get_mut(repo) {
            if r.state != RepoState::Missing {
                log::warn!("repo {} is gone: {why}", repo.display());
            }
            r.state = RepoState::Missing;
            r.problem = Some(why);
        }
    }
}

fn fresh(path: PathBuf) -> RepoReport {
    RepoReport {
        path,
        state: RepoState::Pending,
        problem: None,
        scan: None,
    }
}

fn not_registered(path: &Path) -> RepoError {
    RepoError::NotRegistered {
        path: path.to_path_buf(),
    }
}
