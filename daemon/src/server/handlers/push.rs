//! `pre_push`: before git-lfs runs, send every object the push introduces to
//! the repo's object remote, many at a time. git-lfs then hands the agent
//! one object after another, and each is answered from what this did.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use super::lfs::{self, confirm_sent, facts, layout};
use super::{internal, Progressor, Shared};
use crate::ipc::{ErrorCode, Progress, PushReport, RefusedPath, Reply, WireError};
use crate::lfs::hydrate::object_path;
use crate::lfs::{pushed_pointers, Pointer};
use crate::pool::Oid;
use crate::registry::{Entry, ForeignObject};
use crate::remote::{
    holds, shared_s3, CopySource, ObjectLayout, ObjectUrl, RemoteError, UploadOptions, SHA256_META,
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
        let (repo, remote) = (repo.clone(), remote.clone());
        tokio::task::spawn_blocking(move || pushed_pointers(&repo, &remote, &updates))
            .await
            .map_err(internal)?
            .map_err(|e| WireError::from_error(ErrorCode::InvalidArgument, &e))?
    };
    let foreign: BTreeMap<Oid, Entry> = {
        let (registry, repo) = (shared.registry.clone(), repo.clone());
        tokio::task::spawn_blocking(move || registry.for_repo(&repo))
            .await
            .map_err(internal)?
            .map_err(internal)?
            .into_iter()
            .map(|e| (e.oid, e))
            .collect()
    };
    // A provisional oid left in history by a commit before its promotion:
    // superseded by its content oid, which this push must then carry too.
    let pushed_oids: HashSet<Oid> = objects.iter().map(|p| p.pointer.oid).collect();
    let superseded: HashSet<Oid> = foreign
        .values()
        .filter_map(|e| {
            let o = &e.object;
            let content = o.content_oid?;
            (o.provisional_oid != content && pushed_oids.contains(&content))
                .then_some(o.provisional_oid)
        })
        .collect();
    let total = objects.len() as u64;
    let mut report = PushReport {
        objects: total,
        ..PushReport::default()
    };
    if facts.remote.is_none() {
        // No object remote recorded: nothing can be shown to be where a
        // clone would look, and the agent would have nowhere to send it.
        report.refused = objects
            .into_iter()
            .map(|p| RefusedPath {
                oid: p.pointer.oid.to_hex(),
                paths: p.paths,
                why: "the repo has no object remote to send it to: record one with drsctl init --remote s3://bucket/prefix and commit .gitattributes".into(),
            })
            .collect();
        return Ok(Reply::PrePush(report));
    }
    let layout = layout(&repo, &facts)?;
    let lfs_objects = facts.lfs.join("objects");
    let mut results = stream::iter(objects)
        .map(|pushed| {
            let (layout, lfs_objects, foreign) = (&layout, &lfs_objects, &foreign);
            let remote = remote.as_str();
            let superseded = &superseded;
            async move {
                if superseded.contains(&pushed.pointer.oid) {
                    return (pushed, Outcome::Present);
                }
                let entry = foreign.get(&pushed.pointer.oid);
                let here = Here {
                    layout,
                    lfs_objects,
                    remote,
                };
                let outcome = one(shared, &here, entry, &pushed.pointer).await;
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
            Outcome::Failed(why) => report.failed.push(RefusedPath {
                paths: pushed.paths,
                oid,
                why,
            }),
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

/// What became of one pushed object. Only the first three let the push go
/// on: an object not shown to be in the object remote must not be
/// published, whatever the reason.
enum Outcome {
    Present,
    Uploaded,
    Copied,
    /// Could not be sent or checked now (the store unreachable, a disk
    /// full): the push fails with the reason; pushing again may succeed.
    Failed(String),
    /// Must not be pushed as it is: the reason says what to do.
    Refused(String),
}

/// Where the push's objects go and come from.
struct Here<'a> {
    layout: &'a ObjectLayout,
    lfs_objects: &'a Path,
    /// The git remote pushed to, for the advice in a refusal.
    remote: &'a str,
}

async fn one(
    shared: &Arc<Shared>,
    here: &Here<'_>,
    foreign: Option<&Entry>,
    pointer: &Pointer,
) -> Outcome {
    let oid_hex = pointer.oid.to_hex();
    if let Some(entry) = foreign {
        let o = &entry.object;
        if entry.is_provisional() {
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
            let copied = copy_foreign(here.layout, o, &source, pointer.oid, opts).await;
            let Outcome::Refused(why) = copied else {
                return copied;
            };
            // The source changed or is gone; the bytes its prefetch verified
            // may still be here, and they are what the pointer names.
            return match send_local(shared, here, pointer).await {
                Some(outcome) => outcome,
                None => unless_in_remote(here, pointer, why).await,
            };
        }
    }
    if let Some(outcome) = send_local(shared, here, pointer).await {
        return outcome;
    }
    let why = match foreign {
        Some(_) => "not on this machine yet (its prefetch has not finished: drsctl status) and its source cannot be copied server-side".to_string(),
        None => format!(
            "the object is in neither .git/lfs/objects, the pool, nor the object remote s3://{}/{}, and is not an object this repo added by URL: a clone could not get it. \
             Fetch it here (git lfs fetch {remote} --all), or push it from a clone that has it (git lfs push --object-id {remote} {oid_hex}), or remove the commit that adds it",
            here.layout.bucket,
            here.layout.prefix,
            remote = here.remote,
        ),
    };
    unless_in_remote(here, pointer, why).await
}

/// Present when the object remote holds the object whole (pushed from
/// another clone, say); else refused with `why`. A store that cannot be
/// asked fails the push: an object not shown to be there is not published.
async fn unless_in_remote(here: &Here<'_>, pointer: &Pointer, why: String) -> Outcome {
    let client = match shared_s3() {
        Ok(c) => c,
        Err(e) => {
            return Outcome::Failed(format!(
                "{why}; and the object remote cannot be checked: {e}"
            ))
        }
    };
    match holds(&client, here.layout, &pointer.oid, pointer.size).await {
        Ok(Some(_)) => {
            confirm_sent(here.layout, pointer.oid);
            Outcome::Present
        }
        Ok(None) => Outcome::Refused(why),
        Err(e) => Outcome::Failed(format!(
            "not on this machine, and the object remote could not be checked for it: {e}"
        )),
    }
}

/// Sends the object from `.git/lfs/objects` or the pool; `None` when
/// neither has it.
async fn send_local(shared: &Arc<Shared>, here: &Here<'_>, pointer: &Pointer) -> Option<Outcome> {
    let path = object_path(here.lfs_objects, &pointer.oid);
    match lfs::send_local(shared, here.layout, pointer.oid, pointer.size, path).await {
        Ok(true) => Some(Outcome::Present),
        Ok(false) => Some(Outcome::Uploaded),
        Err(e) if e.code == ErrorCode::NotFound => None,
        Err(e) if e.code == ErrorCode::InvalidArgument => Some(Outcome::Refused(format!(
            "{}: get a good copy (git lfs fetch {remote}; git lfs fsck names bad ones), or remove the commit that adds it",
            e.message,
            remote = here.remote
        ))),
        Err(e) => Some(Outcome::Failed(format!(
            "could not be sent to the object remote: {}",
            e.message
        ))),
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
