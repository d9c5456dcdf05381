//! `promote`: provisional pointers whose object was hashed become content
//! pointers, in the work tree and the index; the user commits. With
//! `retry`, the prefetch jobs of those pointers that `failed` for good are
//! queued again first.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::provisional::standing;
use super::{internal, Shared};
use crate::ipc::{ErrorCode, PromoteReport, Reply, WireError};
use crate::lfs::promote::{promote, Rewrite, Scope};
use crate::lfs::scan::{git_dirs, toplevel};
use crate::lfs::{hydrate, Pointer};
use crate::pool::Oid;
use crate::registry::{mirror, Entry, Registry};

pub(super) async fn handle(
    shared: &Arc<Shared>,
    cwd: PathBuf,
    paths: Vec<PathBuf>,
    all: bool,
    retry: bool,
) -> Result<Reply, WireError> {
    if !all && paths.is_empty() {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            "name the paths to promote, or --all",
        ));
    }
    let (registry, pool) = (shared.registry.clone(), shared.pool.clone());
    let top = {
        let cwd = cwd.clone();
        tokio::task::spawn_blocking(move || toplevel(&cwd))
            .await
            .map_err(internal)?
            .map_err(|e| invalid(e.to_string()))?
    };
    // The workers promote the same pointers on their own: one writer at a
    // time, and what they promoted first is then found done, not changed.
    let _writing = shared.repo_locks.lock(&top).await;
    let promoted = tokio::task::spawn_blocking(move || {
        let wanted: Vec<String> = paths.iter().map(|p| relative(&top, &cwd, p)).collect();
        let entries: Vec<Entry> = registry
            .for_repo(&top)
            .map_err(internal)?
            .into_iter()
            .filter(|e| all || wanted.contains(&e.path))
            .collect();
        let retried = match retry {
            true => retry_failed(&registry, &entries)?,
            false => 0,
        };
        let mut report = PromoteReport {
            repo: top.clone(),
            ..PromoteReport::default()
        };
        let lfs = git_dirs(&top).map_err(internal)?.common_dir.join("lfs");
        let mut rewrites = Vec::new();
        for e in &entries {
            let o = &e.object;
            match (&o.content_oid, e.oid == o.provisional_oid) {
                (_, false) => {} // already a content pointer
                (None, true) => report.waiting.push(standing(&registry, e)?),
                (Some(content), true) => {
                    let (Ok(from), Ok(to)) =
                        (o.provisional_oid.parse::<Oid>(), content.parse::<Oid>())
                    else {
                        continue;
                    };
                    hydrate(&pool, &lfs, &to, o.size).map_err(internal)?;
                    rewrites.push(Rewrite {
                        path: e.path.clone(),
                        from: Pointer {
                            oid: from,
                            size: o.size,
                        },
                        to: Pointer {
                            oid: to,
                            size: o.size,
                        },
                    });
                }
            }
        }
        let done = promote(&top, &rewrites, Scope::All).map_err(internal)?;
        record(&registry, &top, &lfs, entries, &done.rewritten)?;
        report.rewritten = done.rewritten;
        report.changed = done.changed;
        Ok::<_, WireError>((report, retried))
    })
    .await
    .map_err(internal)?;
    let (report, retried) = promoted?;
    if retried > 0 {
        log::info!("{retried} failed prefetch job(s) queued again");
        shared.jobs_wake.notify_waiters();
    }
    Ok(Reply::Promoted(report))
}

/// Queues again the failed jobs of the entries' unhashed objects.
fn retry_failed(registry: &Registry, entries: &[Entry]) -> Result<usize, WireError> {
    let oids: Vec<String> = entries
        .iter()
        .filter(|e| e.object.content_oid.is_none())
        .map(|e| e.object.provisional_oid.clone())
        .collect();
    registry.retry_failed(&oids).map_err(internal)
}

/// The registry and the repo's mirror learn the rewritten paths' new oids.
fn record(
    registry: &Registry,
    top: &Path,
    lfs: &Path,
    entries: Vec<Entry>,
    rewritten: &[String],
) -> Result<(), WireError> {
    let changed: Vec<Entry> = entries
        .into_iter()
        .filter(|e| rewritten.contains(&e.path))
        .map(|mut e| {
            e.oid = e.object.content_oid.clone().unwrap_or(e.oid);
            e
        })
        .collect();
    registry.record(top, &changed).map_err(internal)?;
    let listed = registry.for_repo(top).map_err(internal)?;
    let common = lfs.parent().unwrap_or(lfs);
    mirror::write(common, &listed).map_err(internal)
}

/// `path` (relative to `cwd`, or absolute) relative to the repo's top, `/`-separated.
fn relative(top: &Path, cwd: &Path, path: &Path) -> String {
    let full = std::path::absolute(cwd.join(path)).unwrap_or_else(|_| cwd.join(path));
    full.strip_prefix(top)
        .unwrap_or(&full)
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

fn invalid(why: String) -> WireError {
    WireError::new(ErrorCode::InvalidArgument, why)
}
