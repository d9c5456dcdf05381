//! `pre_push`: before git-lfs runs, send every object the push introduces to
//! the repo's object remote, many at a time. git-lfs then hands the agent
//! one object after another, and each is answered from what this did.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use super::lfs::{confirm_sent, facts, layout, send_object, take_in};
use super::{internal, Progressor, Shared};
use crate::ipc::{ErrorCode, ObjectProblem, Progress, PushReport, RefusedPath, Reply, WireError};
use crate::lfs::hydrate::object_path;
use crate::lfs::{pushed_pointers, Pointer};
use crate::pool::Oid;
use crate::registry::{Entry, ForeignObject};
use crate::remote::{
    shared_s3, CopySource, ObjectLayout, ObjectUrl, RemoteError, UploadOptions, SHA256_META,
};

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
    let objects = {
        let repo = repo.clone();
        tokio::task::spawn_blocking(move || pushed_pointers(&repo, &remote, &updates))
            .await
            .map_err(internal)?
            .map_err(|e| WireError::new(ErrorCode::InvalidArgument, e.to_string()))?
    };
    let foreign: BTreeMap<String, Entry> = {
        let (registry, repo) = (shared.registry.clone(), repo.clone());
        tokio::task::spawn_blocking(move || registry.for_repo(&repo))
            .await
            .map_err(internal)?
            .map_err(internal)?
            .into_iter()
            .map(|e| (e.oid.clone(), e))
            .collect()
    };
    let total = objects.len() as u64;
    let mut report = PushReport {
        objects: total,
        ..PushReport::default()
    };
    if facts.remote.is_none() {
        // No object remote recorded: git-lfs and the agent say what is wrong
        // with local objects; foreign ones have nowhere to go.
        report.refused = objects
            .into_iter()
            .filter(|p| foreign.contains_key(&p.pointer.oid.to_hex()))
            .map(|p| RefusedPath {
                oid: p.pointer.oid.to_hex(),
                paths: p.paths,
                why: "an object added by URL, and the repo has no object remote to copy it to (drsctl init --remote s3://bucket/prefix)".into(),
            })
            .collect();
        return Ok(Reply::PrePush(report));
    }
    let layout = layout(&repo, &facts)?;
    let lfs_objects = facts.lfs.join("objects");
    let mut results = stream::iter(objects)
        .map(|pushed| {
            let (layout, lfs_objects, foreign) = (&layout, &lfs_objects, &foreign);
            async move {
                let entry = foreign.get(&pushed.pointer.oid.to_hex());
                let outcome = one(shared, layout, lfs_objects, entry, &pushed.pointer).await;
                (pushed, outcome)
            }
        })
        .buffer_unordered(PARALLEL);
    let mut done = 0;
    while let Some((pushed, outcome)) = results.next().await {
        let oid = pushed.pointer.oid.to_hex();
        match outcome {
            Outcome::Present => report.present += 1,
            Outcome::Uploaded => report.uploaded += 1,
            Outcome::Copied => report.copied += 1,
            Outcome::Failed(why) => report.failed.push(ObjectProblem { oid, why }),
            Outcome::Refused(why) => report.refused.push(RefusedPath {
                paths: pushed.paths,
                oid,
                why,
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
        "pre-push {}: {} objects, {} uploaded, {} copied, {} present, {} failed, {} refused, in {:.2} s",
        repo.display(),
        report.objects,
        report.uploaded,
        report.copied,
        report.present,
        report.failed.len(),
        report.refused.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(Reply::PrePush(report))
}

/// What became of one pushed object.
enum Outcome {
    Present,
    Uploaded,
    Copied,
    /// Could not be sent now; git-lfs and the agent try again.
    Failed(String),
    /// Must not be pushed as it is.
    Refused(String),
}

async fn one(
    shared: &Arc<Shared>,
    layout: &ObjectLayout,
    lfs_objects: &Path,
    foreign: Option<&Entry>,
    pointer: &Pointer,
) -> Outcome {
    let oid_hex = pointer.oid.to_hex();
    if let Some(entry) = foreign {
        let o = &entry.object;
        if o.content_oid.as_deref() != Some(oid_hex.as_str()) {
            return Outcome::Refused(format!(
                "the pointer still carries the provisional oid of {} (from its ETag): a clone could not verify it; wait for its hash (drsctl status), run drsctl promote and commit",
                o.url
            ));
        }
        if let Ok(ObjectUrl::S3 { bucket, key }) = ObjectUrl::parse(o.url.expose()) {
            let source = CopySource {
                bucket: &bucket,
                key: &key,
                etag: Some(o.etag.as_str()).filter(|e| !e.is_empty()),
                size: o.size,
            };
            let opts = shared.config.upload;
            let copied = copy_foreign(layout, o, &source, pointer.oid, opts).await;
            let Outcome::Refused(why) = copied else {
                return copied;
            };
            // The source changed or is gone; the bytes its prefetch verified
            // may still be here, and they are what the pointer names.
            return send_local(shared, layout, lfs_objects, pointer)
                .await
                .unwrap_or(Outcome::Refused(why));
        }
    }
    match send_local(shared, layout, lfs_objects, pointer).await {
        Some(outcome) => outcome,
        None if foreign.is_some() => Outcome::Refused(
            "not on this machine yet (its prefetch has not finished: drsctl status) and its source cannot be copied server-side".into(),
        ),
        None => Outcome::Refused(
            "neither in .git/lfs/objects nor in the pool, and not an object this repo added by URL".into(),
        ),
    }
}

/// Sends the object from `.git/lfs/objects` or the pool; `None` when
/// neither has it.
async fn send_local(
    shared: &Arc<Shared>,
    layout: &ObjectLayout,
    lfs_objects: &Path,
    pointer: &Pointer,
) -> Option<Outcome> {
    let path = object_path(lfs_objects, &pointer.oid);
    match take_in(shared, pointer.oid, pointer.size, Some(path)).await {
        Ok(()) => Some(match send_object(shared, layout, pointer.oid).await {
            Ok(true) => Outcome::Present,
            Ok(false) => Outcome::Uploaded,
            Err(e) => Outcome::Failed(e.message),
        }),
        Err(e) if e.code == ErrorCode::NotFound => None,
        Err(e) => Some(Outcome::Failed(e.message)),
    }
}

/// Confirms the foreign object is still what was added (size, ETag), then
/// copies it server-side into the object remote's layout, unless it is
/// there: in one CopyObject, or in parts past `opts.copy_whole_max`.
async fn copy_foreign(
    layout: &ObjectLayout,
    o: &ForeignObject,
    src: &CopySource<'_>,
    oid: Oid,
    opts: UploadOptions,
) -> Outcome {
    let client = match shared_s3() {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let source = format!("s3://{}/{}", src.bucket, src.key);
    match client.head(src.bucket, src.key).await {
        Ok(Some(now))
            if now.size == o.size
                && (o.etag.is_empty() || now.etag.as_deref() == Some(o.etag.as_str())) => {}
        Ok(Some(now)) => {
            return Outcome::Refused(format!(
                "{source} changed since it was added: {} bytes, ETag {}; it was {} bytes, ETag {}",
                now.size,
                now.etag.unwrap_or_default(),
                o.size,
                o.etag
            ))
        }
        Ok(None) => return Outcome::Refused(format!("{source} is gone")),
        Err(e) => return Outcome::Failed(e.to_string()),
    }
    let hex = oid.to_hex();
    let dest = layout.key(&oid);
    if let Ok(Some(there)) = client.head(&layout.bucket, &dest).await {
        if there.size == o.size && there.sha256.as_deref() == Some(hex.as_str()) {
            confirm_sent(layout, oid);
            return Outcome::Present;
        }
    }
    let meta = [(SHA256_META, hex.as_str())];
    let copied = if o.size <= opts.copy_whole_max {
        client.copy(src, &layout.bucket, &dest, &meta).await
    } else {
        let part_size = copy_part_size(o.size, opts.part_size);
        client
            .copy_in_parts(src, &layout.bucket, &dest, part_size, &meta)
            .await
    };
    match copied {
        Ok(meta) if meta.size == o.size => {
            confirm_sent(layout, oid);
            Outcome::Copied
        }
        Ok(meta) => Outcome::Failed(format!(
            "the copy of {source} has {} bytes, not {}",
            meta.size, o.size
        )),
        Err(RemoteError::Http { status: 412, .. }) => Outcome::Refused(format!(
            "{source} changed since it was added (its ETag is no longer {})",
            o.etag
        )),
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

/// S3 allows at most 10,000 parts: past `part_size × 10,000` the parts grow,
/// in whole MiB.
fn copy_part_size(size: u64, part_size: u64) -> u64 {
    const MAX_PARTS: u64 = 10_000;
    const MIB: u64 = 1 << 20;
    part_size.max(size.div_ceil(MAX_PARTS).div_ceil(MIB) * MIB)
}

#[cfg(test)]
mod tests {
    use super::copy_part_size;

    #[test]
    fn copy_parts_stay_within_ten_thousand() {
        let mib = 1u64 << 20;
        assert_eq!(copy_part_size(6 << 30, 64 * mib), 64 * mib);
        let huge = 5u64 << 40; // 5 TiB, S3's largest object
        let part = copy_part_size(huge, 64 * mib);
        assert!(
            huge.div_ceil(part) <= 10_000,
            "{} parts",
            huge.div_ceil(part)
        );
        assert_eq!(part % mib, 0);
    }
}
