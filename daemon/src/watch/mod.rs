//! Watching registered repos for changes, through `notify` with a debouncer.
//!
//! Per repo: its git folder and the common git folder, not recursively (HEAD,
//! index, FETCH_HEAD, packed-refs change there), and recursively `refs/` and
//! `lfs/objects/`. Changes reach the daemon as repo paths on a channel, at
//! most one batch per debounce period.
//!
//! On Linux every watched folder costs one inotify watch, and a recursive
//! watch costs one per folder under it: `lfs/objects` holds up to 65,536
//! two-level fan-out folders. The per-user limit is
//! `fs.inotify.max_user_watches`. When the OS refuses a watch, the repo is
//! not watched at all (no half-watched repos) and the daemon rescans it on a
//! timer instead; `drsctl status` shows it as `polling`, with the reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, EventKind, MetadataKind, ModifyKind};
use notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{new_debouncer, DebounceEventResult, Debouncer, RecommendedCache};
use tokio::sync::mpsc::UnboundedSender;

use crate::git::Repo;
use crate::lock::lock;

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("starting the file watcher: {0}")]
    Start(#[source] notify::Error),
    #[error("watching {path}: {source}")]
    Watch {
        path: PathBuf,
        #[source]
        source: notify::Error,
    },
}

pub struct Watcher {
    debouncer: Debouncer<RecommendedWatcher, RecommendedCache>,
    /// Watched folder -> the repo it belongs to.
    owners: std::sync::Arc<std::sync::Mutex<BTreeMap<PathBuf, PathBuf>>>,
    /// Repo -> its watched folders, to unwatch them.
    watched: BTreeMap<PathBuf, Vec<PathBuf>>,
}

impl Watcher {
    /// Starts the watcher thread; each debounced batch of changes is sent on
    /// `changed` as the set of repos concerned.
    pub fn start(
        debounce: Duration,
        changed: UnboundedSender<Vec<PathBuf>>,
    ) -> Result<Watcher, WatchError> {
        let owners =
            std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::<PathBuf, PathBuf>::new()));
        let lookup = owners.clone();
        let handler = move |result: DebounceEventResult| match result {
            Ok(events) => {
                let owners = lock(&lookup);
                let mut repos: Vec<PathBuf> = events
                    .iter()
                    .filter(|e| is_change(&e.event.kind))
                    .flat_map(|e| e.event.paths.iter())
                    .filter_map(|path| owner_of(&owners, path))
                    .collect();
                repos.sort();
                repos.dedup();
                if !repos.is_empty() {
                    let _ = changed.send(repos);
                }
            }
            Err(errors) => errors.iter().for_each(|e| log::warn!("file watcher: {e}")),
        };
        let debouncer = new_debouncer(debounce, None, handler).map_err(WatchError::Start)?;
        Ok(Watcher {
            debouncer,
            owners,
            watched: BTreeMap::new(),
        })
    }

    /// Watches `repo`'s git folders. On error nothing stays watched for it.
    pub fn watch_repo(&mut self, repo: &Path, dirs: &Repo) -> Result<(), WatchError> {
        self.unwatch_repo(repo);
        let mut done = Vec::new();
        for (path, mode) in watch_list(dirs) {
            if let Err(source) = self.debouncer.watch(&path, mode) {
                self.forget(&done);
                return Err(WatchError::Watch { path, source });
            }
            done.push(path);
        }
        let mut owners = lock(&self.owners);
        for path in &done {
            owners.insert(path.clone(), repo.to_path_buf());
        }
        drop(owners);
        self.watched.insert(repo.to_path_buf(), done);
        Ok(())
    }

    /// Stops watching `repo`; quiet if it was not watched or its folders are gone.
    pub fn unwatch_repo(&mut self, repo: &Path) {
        if let Some(paths) = self.watched.remove(repo) {
            self.forget(&paths);
        }
    }

    fn forget(&mut self, paths: &[PathBuf]) {
        let mut owners = lock(&self.owners);
        for path in paths {
            owners.remove(path);
            // A deleted folder has lost its watch already; that error means nothing.
            let _ = self.debouncer.unwatch(path);
        }
    }
}

/// What to watch for one repo; `lfs/objects` only once git-lfs has made it
/// (its creation shows up in the common dir's watch and triggers a rewatch).
fn watch_list(dirs: &Repo) -> Vec<(PathBuf, RecursiveMode)> {
    let mut list = vec![(dirs.git_dir.clone(), RecursiveMode::NonRecursive)];
    if dirs.common_dir != dirs.git_dir {
        list.push((dirs.common_dir.clone(), RecursiveMode::NonRecursive));
    }
    list.push((dirs.common_dir.join("refs"), RecursiveMode::Recursive));
    let lfs = dirs.common_dir.join("lfs");
    let objects = lfs.join("objects");
    if objects.is_dir() {
        list.push((objects, RecursiveMode::Recursive));
    } else if lfs.is_dir() {
        list.push((lfs, RecursiveMode::NonRecursive));
    }
    list
}

/// Whether an event says something changed. Reads are not changes: the
/// daemon's own scans open HEAD, refs and config, and reacting to those
/// would rescan forever.
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)) => false,
        _ => true,
    }
}

/// The repo owning the watched folder that contains `path`.
fn owner_of(owners: &BTreeMap<PathBuf, PathBuf>, path: &Path) -> Option<PathBuf> {
    path.ancestors().find_map(|dir| owners.get(dir).cloned())
}

impl Watcher {
    /// Whether `repo` is unwatched or its watch list has changed since (git-lfs
    /// created `lfs/objects`), so the caller should watch it again.
    pub fn needs_rewatch(&self, repo: &Path, dirs: &Repo) -> bool {
        let want: Vec<PathBuf> = watch_list(dirs).into_iter().map(|(p, _)| p).collect();
        self.watched.get(repo).is_none_or(|have| *have != want)
    }
}
