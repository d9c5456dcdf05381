//! `pre_push`: before git-lfs runs, send every object the push introduces to
//! the repo's object remote, many at a time. git-lfs then hands the agent
//! one object after another, and each is answered from what this did.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use super::lfs::{facts, layout, send_object, take_in};
use super::{internal, Progressor, Shared};
use crate::ipc::{ErrorCode, ObjectProblem, Progress, PushReport, Reply, WireError};
use crate::lfs::hydrate::object_path;
use crate::lfs::{pushed_pointers, Pushed};

/// Uploads in flight at once: RGW's small-object rate stops growing past
/// about 32 (docs/benchmarks.md).
pub(super) const PARALLEL: usize = 32;

pub(super) async fn handle(
    shared: &Arc<Shared>,
    repo: PathBuf,
    remote: String,
    updates: String,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let started = std::time::Instant::now();
    let facts = facts(&repo).await?;
    if facts.remote.is_none() {
        // No object remote recorded: git-lfs and the agent say what is wrong.
        return Ok(Reply::PrePush(PushReport::default()));
    }
    let layout = layout(&repo, &facts)?;
    let objects = {
        let repo = repo.clone();
        tokio::task::spawn_blocking(move || pushed_pointers(&repo, &remote, &updates))
            .await
            .map_err(internal)?
            .map_err(|e| WireError::new(ErrorCode::InvalidArgument, e.to_string()))?
    };
    let total = objects.len() as u64;
    let mut report = PushReport {
        objects: total,
        ..PushReport::default()
    };
    let lfs_objects = facts.lfs.join("objects");
    let mut results = stream::iter(objects)
        .map(|Pushed { pointer, .. }| {
            let path = object_path(&lfs_objects, &pointer.oid);
            let layout = &layout;
            async move {
                let sent = async {
                    take_in(shared, pointer.oid, pointer.size, Some(path)).await?;
                    send_object(shared, layout, pointer.oid).await
                };
                (pointer.oid, sent.await)
            }
        })
        .buffer_unordered(PARALLEL);
    let mut done = 0;
    while let Some((oid, outcome)) = results.next().await {
        match outcome {
            Ok(true) => report.present += 1,
            Ok(false) => report.uploaded += 1,
            Err(e) => report.failed.push(ObjectProblem {
                oid: oid.to_hex(),
                why: e.message,
            }),
        }
        done += 1;
        progress.send_now(Progress {
            stage: "upload".into(),
            done,
            total: Some(total),
            message: None,
        });
    }
    log::info!(
        "pre-push {}: {} objects, {} uploaded, {} present, {} failed, in {:.2} s",
        repo.display(),
        report.objects,
        report.uploaded,
        report.present,
        report.failed.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(Reply::PrePush(report))
}
