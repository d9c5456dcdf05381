//! Recording and staging an add-url: the registry, the repo's mirror, the
//! pointer files, `.gitattributes`, `git add`, in that order, so a kill at
//! any point leaves the registry knowing at least what the repo points at.
//! As the repo's only writer (its lock held): the paths are checked again
//! first (the work tree may have changed during the HEADs), and a failure
//! after the registry puts the work tree back.

use std::path::Path;
use std::time::{Duration, Instant};

use super::plan::{check_existing, check_inside};
use super::read_small::FailedRead;
use super::resolve::Resolved;
use super::{Added, ForeignError, ForeignObjects, Refused};
use crate::git::Repo;
use crate::lfs::{track, Pointer};
use crate::pool::Oid;
use crate::registry::{Entry, JobState, Registry};

/// How long git's `index.lock`, held by another git, is waited for.
const INDEX_WAIT: Duration = Duration::from_secs(5);

/// Where and how an add-url writes.
pub(super) struct Staging<'a> {
    pub top: &'a Path,
    pub common: &'a Path,
    pub force: bool,
    pub no_fetch: bool,
}

impl ForeignObjects {
    /// Writes and stages the resolved lines (see the module's notes), then
    /// queues the prefetch of what is still provisional.
    pub(super) async fn record_and_stage(
        &self,
        at: Staging<'_>,
        resolved: Vec<Resolved>,
        failed_reads: Vec<FailedRead>,
        refused: &mut Vec<Refused>,
    ) -> Result<Vec<Added>, ForeignError> {
        if resolved.is_empty() {
            return Ok(Vec::new());
        }
        let _writing = self.repo_locks.lock(at.top).await;
        let registry = self.registry.clone();
        let (top, common) = (at.top.to_path_buf(), at.common.to_path_buf());
        let (force, no_fetch) = (at.force, at.no_fetch);
        let (added, failed) = crate::blocking(move || {
            let (resolved, failed) = recheck(&top, resolved, force);
            check_attributes_file(&top)?;
            wait_for_index(&top)?;
            let added = write_all(&registry, &top, &common, resolved)?;
            // Every object not read here yet: a provisional one, and one
            // whose content oid a claim named (checked by its prefetch).
            let oids: Vec<Oid> = added
                .iter()
                .filter(|a| a.provisional || a.oid_from != super::resolve::OidFrom::Hashed)
                .map(|a| a.oid)
                .collect();
            if no_fetch {
                // Before any job is queued for them, so no worker takes one.
                registry.skip(&oids)?;
            } else {
                // Added before with --no-fetch: this add-url asks for the bytes.
                registry.queue_again(&oids, &[JobState::Skipped])?;
                // Before the workers are woken: a read that failed is the
                // job's first try, not repeated at once.
                registry.tried(&failed_reads)?;
            }
            Ok::<_, ForeignError>((added, failed))
        })
        .await?;
        refused.extend(failed);
        self.queue_unhashed().await;
        Ok(added)
    }
}

/// The planned paths checked again under the repo's lock: a symlink or a
/// file planted since the plan is refused, not written through or over.
fn recheck(top: &Path, resolved: Vec<Resolved>, force: bool) -> (Vec<Resolved>, Vec<Refused>) {
    let mut refused = Vec::new();
    let mut ok = Vec::with_capacity(resolved.len());
    for r in resolved {
        let rel = &r.entry.path;
        let checked = check_inside(top, rel).and_then(|()| check_existing(&top.join(rel), force));
        match checked {
            Ok(()) => ok.push(r),
            Err(fault) => refused.push(Refused {
                line: r.target.no,
                url: r.target.url.to_string(),
                message: fault.to_string(),
            }),
        }
    }
    (ok, refused)
}

/// Refuses, before anything is written, a top `.gitattributes` that is not
/// a regular file (git does not read one that is a symlink either).
fn check_attributes_file(top: &Path) -> Result<(), ForeignError> {
    let file = top.join(".gitattributes");
    match std::fs::symlink_metadata(&file) {
        Ok(m) if !m.is_file() => Err(ForeignError::Refused(format!(
            "{} is not a regular file (a symbolic link or a folder); nothing was added",
            file.display()
        ))),
        _ => Ok(()),
    }
}

/// Waits a little for another git's `index.lock` in the repo to go, so the
/// files are not written only for staging to fail; a clear error, with
/// nothing written, when it stays.
fn wait_for_index(top: &Path) -> Result<(), ForeignError> {
    let git_dir = Repo::locate(top)?.git_dir;
    let lock = git_dir.join("index.lock");
    let start = Instant::now();
    while lock.exists() {
        if start.elapsed() > INDEX_WAIT {
            return Err(ForeignError::Refused(format!(
                "{}: another git command holds {} (for over {}s); nothing was added. Run add-url again once it is done, or remove that file if no git is running",
                top.display(),
                lock.display(),
                INDEX_WAIT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn write_all(
    registry: &Registry,
    top: &Path,
    common: &Path,
    resolved: Vec<Resolved>,
) -> Result<Vec<Added>, ForeignError> {
    let entries: Vec<Entry> = resolved.iter().map(|r| r.entry.clone()).collect();
    let clock = Instant::now();
    registry.record_and_mirror(top, common, &entries, &[])?;
    let recorded = clock.elapsed();
    let before = WorkTree::save(top, &entries);
    let written = write_files(top, &entries).inspect_err(|_| before.put_back(top))?;
    log::debug!(
        "add-url of {} objects: registry and mirror {recorded:?}, pointers, {written} .gitattributes lines and staging {:?}",
        entries.len(),
        clock.elapsed() - recorded
    );
    Ok(resolved.into_iter().map(added).collect())
}

/// The pointer files, `.gitattributes` and the index; returns how many
/// `.gitattributes` lines were added.
fn write_files(top: &Path, entries: &[Entry]) -> Result<usize, ForeignError> {
    for e in entries {
        let text = Pointer {
            oid: e.oid,
            size: e.object.size,
        }
        .to_text();
        track::replace(top, &e.path, text.as_bytes())?;
    }
    let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
    Ok(track::track_and_stage(top, &paths)?)
}

/// The work-tree files an add-url is about to write, as they were, so a
/// failure before they are staged (git's index held too long, a full disk)
/// leaves no untracked pointer or stray `.gitattributes` line. The registry
/// keeps its entries: it may know more than the repo points at, never less.
struct WorkTree(Vec<(String, Option<Vec<u8>>)>);

impl WorkTree {
    fn save(top: &Path, entries: &[Entry]) -> WorkTree {
        let paths = entries.iter().map(|e| e.path.as_str());
        let files = std::iter::once(".gitattributes").chain(paths);
        WorkTree(
            files
                .map(|rel| (rel.to_string(), std::fs::read(top.join(rel)).ok()))
                .collect(),
        )
    }

    fn put_back(&self, top: &Path) {
        for (rel, old) in &self.0 {
            let undone = match old {
                Some(bytes) => track::replace(top, rel, bytes).map_err(|e| e.to_string()),
                None => match std::fs::remove_file(top.join(rel)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.to_string()),
                    _ => Ok(()),
                },
            };
            if let Err(e) = undone {
                log::warn!("add-url in {}: putting {rel} back: {e}", top.display());
            }
        }
    }
}

fn added(r: Resolved) -> Added {
    Added {
        line: r.target.no,
        url: r.target.url.to_string(),
        provisional: r.entry.is_provisional(),
        path: r.entry.path,
        oid: r.entry.oid,
        size: r.entry.object.size,
        oid_from: r.oid_from,
    }
}
