//! A multipart upload through Fence: parts of `upload_part_size`, read
//! ahead, a few on the wire at once, and hashed beside their upload (the
//! sha256 and the md5 each on a thread of its own, fed the parts in the
//! object's order); Fence completes the upload only once the whole is shown
//! to be the object. A part's bytes are one buffer, hashed and sent as
//! they are: what is hashed is what is sent.
//!
//! Each part the store took is recorded with the ETag it answered
//! (`registry/fence_uploads.rs`), so a push resumed after a kill sends only
//! the parts missing, into the same upload: nothing sent twice, and no
//! orphaned parts left in the commons' bucket (Fence has no call to abort
//! an upload). A recorded part counts as in the store only when the md5 of
//! the bytes read now is the ETag the store answered for it (an S3 part's
//! ETag is its md5); otherwise it is sent again. Every byte is hashed as
//! before whatever was skipped: the record is completed only for the
//! object. An upload that cannot be resumed (the store dropped it, or
//! refused the parts) is left, and a new one begun under the same record.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use md5::{Digest, Md5};
use sha2::Sha256;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{location_of, read_part, CommonsTarget, FenceSendError};
use crate::blocking;
use crate::lfs::Pointer;
use crate::ops::transfer::Transfers;
use crate::pool::{Blob, Oid};
use crate::registry::{FencePart, FenceStep};
use crate::stores::drs::Fence;
use crate::stores::Permanence;

/// Parts of a multipart upload through Fence on the wire at once: the
/// next are read and sent while one is still going, at the memory of this
/// many parts (`upload_part_size`, 64 MiB by default).
const PARTS_AT_ONCE: usize = 3;
/// Parts read ahead of their sending, so that reading (page faults and a
/// copy out of the page cache), hashing and the wire overlap.
const READ_AHEAD: usize = 2;
/// Parts waiting for each hash's thread. With those read ahead and those
/// on the wire, at most 7 parts are in memory at once.
const HASH_QUEUE: usize = 2;

/// A multipart upload open in the commons' bucket, and the parts of it
/// recorded as sent (number to the ETag the store answered).
struct OpenUpload {
    guid: String,
    upload_id: String,
    /// The object's key in the bucket: `guid/file_name`.
    key: String,
    sent: BTreeMap<u32, String>,
}

/// What a multipart upload ends with: the record's guid, the object's
/// location (from a part's signed URL), the md5 of the whole (when it was
/// not known before) and the ETag the store must now answer for it.
pub(super) struct Sent {
    pub guid: String,
    pub location: Option<String>,
    pub md5: Option<String>,
    /// `md5(md5(part 1) .. md5(part N))-N`, of the bytes sent.
    pub etag: String,
}

/// The object to send and what is known of it.
pub(super) struct Source<'a> {
    pub pointer: Pointer,
    pub blob: Arc<Blob>,
    /// The md5 when known before the upload (a pass over these very bytes
    /// that also showed their sha256): not hashed again. Else the upload
    /// hashes it beside the parts'.
    pub md5: Option<&'a str>,
    /// The md5s of its parts when known before (the same pass): not
    /// hashed again.
    pub parts: Option<&'a [[u8; 16]]>,
    /// The name Fence files it under.
    pub name: &'a str,
}

/// What a push before left open: the blank record, and the upload begun
/// into it when it got that far.
#[derive(Default)]
pub(super) struct Left<'a> {
    pub guid: Option<&'a str>,
    pub upload_id: Option<&'a str>,
}

impl Transfers {
    /// Sends `source` as a multipart upload under `left.guid` (a blank
    /// record's guid, or the content's did no record holds yet, which
    /// Fence takes as given), else into a new blank record of Fence's;
    /// resuming the upload `left.upload_id` when the registry holds parts
    /// of it.
    pub(super) async fn multipart(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        source: &Source<'_>,
        left: Left<'_>,
    ) -> Result<Sent, FenceSendError> {
        let oid = source.pointer.oid;
        if let (Some(guid), Some(upload_id)) = (left.guid, left.upload_id) {
            if let Some(open) = self.resumable_upload(target, oid, guid, upload_id).await? {
                match self.send_parts(target, fence, source, &open).await {
                    Err(FenceSendError::Fence(e)) if e.permanence() == Permanence::Permanent => {
                        log::warn!(
                            "object {oid}: the multipart upload a push before began into record {guid} cannot be resumed ({e}); beginning a new one"
                        );
                    }
                    done => return done,
                }
            }
        }
        let start = fence.multipart_init(source.name, left.guid).await?;
        self.journal(
            target,
            oid,
            FenceStep::Uploading,
            Some(&start.guid),
            Some(&start.upload_id),
        )
        .await?;
        let open = OpenUpload {
            key: format!("{}/{}", start.guid, source.name),
            guid: start.guid,
            upload_id: start.upload_id,
            sent: BTreeMap::new(),
        };
        self.send_parts(target, fence, source, &open).await
    }

    /// The upload `upload_id` into record `guid` as the registry left it,
    /// when it recorded parts of it (with none, a new upload costs the
    /// same and leaves nothing unknown behind).
    async fn resumable_upload(
        &self,
        target: &CommonsTarget<'_>,
        oid: Oid,
        guid: &str,
        upload_id: &str,
    ) -> Result<Option<OpenUpload>, FenceSendError> {
        let (registry, commons, id) = (
            self.registry.clone(),
            target.key.clone(),
            upload_id.to_string(),
        );
        let parts =
            blocking(move || registry.fence_journal().fence_parts(&commons, oid, &id)).await?;
        let Some(key) = parts.first().map(|p| p.key.clone()) else {
            return Ok(None);
        };
        // The key is the registry's word (a lab's registry is every
        // member's to write): it must be under this very record.
        if !key.starts_with(&format!("{guid}/")) || parts.iter().any(|p| p.key != key) {
            return Ok(None);
        }
        self.journal(
            target,
            oid,
            FenceStep::Uploading,
            Some(guid),
            Some(upload_id),
        )
        .await?;
        Ok(Some(OpenUpload {
            guid: guid.to_string(),
            upload_id: upload_id.to_string(),
            key,
            sent: parts.into_iter().map(|p| (p.number, p.etag)).collect(),
        }))
    }

    /// The parts of `source` into `open`: read READ_AHEAD at a time
    /// (`buffered` keeps their order), handed in that order to the hashes'
    /// threads (`then`), and up to PARTS_AT_ONCE of them on the wire. A
    /// part `open` holds already is not sent again when its md5 is its
    /// ETag. The whole must hash to the oid (and to the md5 known, if any)
    /// before Fence is asked to complete the upload.
    async fn send_parts(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        source: &Source<'_>,
        open: &OpenUpload,
    ) -> Result<Sent, FenceSendError> {
        let pointer = source.pointer;
        let oid = pointer.oid;
        let part_size = self.upload.part_size.max(1);
        let count = pointer.size.div_ceil(part_size).max(1);
        let spans = (1..=count).map(|n| {
            let offset = (n - 1) * part_size;
            (n as u32, offset, part_size.min(pointer.size - offset))
        });
        let hashing = Hashing::start(source.md5.is_none(), source.parts.is_none());
        let kept = AtomicUsize::new(0);
        let sent: Vec<(u32, String, Option<String>)> = stream::iter(spans)
            .map(|(number, offset, len)| {
                let blob = source.blob.clone();
                async move {
                    Ok::<_, FenceSendError>((number, read_part(blob, offset, len).await?))
                }
            })
            .buffered(READ_AHEAD)
            .then(|read| {
                let feeder = hashing.feeder();
                async move {
                    let (number, bytes) = read?;
                    let bytes = Bytes::from(bytes);
                    feeder.feed(bytes.clone()).await;
                    Ok::<_, FenceSendError>((number, bytes))
                }
            })
            .map(|hashed| {
                let kept = &kept;
                let recorded = Recorded {
                    registry: self.registry.clone(),
                    commons: target.key.clone(),
                    oid,
                };
                async move {
                    let (number, bytes) = hashed?;
                    let url = fence.part_url(&open.key, &open.upload_id, number).await?;
                    let location = location_of(&url, &open.key);
                    let etag = open.sent.get(&number).cloned();
                    if let Some(etag) = held(etag, bytes.clone()).await {
                        kept.fetch_add(1, Ordering::Relaxed);
                        return Ok((number, etag, location));
                    }
                    let what = format!("part {number} of object {oid}");
                    let etag = fence
                        .put(&what, &url, bytes)
                        .await?
                        .ok_or(FenceSendError::NoEtag { number, oid })?;
                    recorded
                        .part(FencePart {
                            upload_id: open.upload_id.clone(),
                            key: open.key.clone(),
                            number,
                            etag: etag.clone(),
                        })
                        .await;
                    Ok::<_, FenceSendError>((number, etag, location))
                }
            })
            .buffered(PARTS_AT_ONCE)
            .try_collect()
            .await?;
        let hashed = hashing
            .finish()
            .await
            .ok_or(FenceSendError::HashingStopped { oid })?;
        if hashed.sha256 != oid {
            return Err(FenceSendError::NotTheObject {
                oid,
                got: hashed.sha256,
            });
        }
        let md5s = source.parts.map(<[_]>::to_vec).unwrap_or(hashed.parts);
        if md5s.len() != sent.len() {
            return Err(FenceSendError::HashingStopped { oid });
        }
        for ((number, etag, _), md5) in sent.iter().zip(&md5s) {
            if etag.to_ascii_lowercase() != hex::encode(md5) {
                return Err(FenceSendError::PartNotStored {
                    number: *number,
                    oid,
                });
            }
        }
        let kept = kept.into_inner();
        if kept > 0 {
            log::info!(
                "object {oid}: resumed the upload into record {}: {kept} of {count} parts were in the store already",
                open.guid
            );
        }
        let location = sent.first().and_then(|(_, _, at)| at.clone());
        let parts: Vec<(u32, String)> = sent.into_iter().map(|(n, etag, _)| (n, etag)).collect();
        fence
            .multipart_complete(&open.key, &open.upload_id, &parts)
            .await?;
        Ok(Sent {
            guid: open.guid.clone(),
            location,
            md5: hashed.md5,
            etag: multipart_etag(&md5s),
        })
    }
}

/// `etag`, the ETag recorded for a part, when it is the md5 of `bytes`,
/// the part's bytes now: the store holds these very bytes, and they are not
/// sent again.
async fn held(etag: Option<String>, bytes: Bytes) -> Option<String> {
    let etag = etag?;
    blocking(move || (etag == hex::encode(Md5::digest(&bytes))).then_some(etag)).await
}

/// Where the parts the store took are recorded.
struct Recorded {
    registry: Arc<crate::registry::Registry>,
    commons: String,
    oid: Oid,
}

impl Recorded {
    /// Records that the store took `part`. A failure to record costs only
    /// that part's resending after a kill: logged.
    async fn part(self, part: FencePart) {
        let Recorded {
            registry,
            commons,
            oid,
        } = self;
        let number = part.number;
        if let Err(e) = blocking(move || {
            registry
                .fence_journal()
                .fence_part_sent(&commons, oid, &part)
        })
        .await
        {
            log::warn!("recording part {number} of object {oid} as sent: {e}");
        }
    }
}

/// The ETag S3 (and Ceph RGW) gives an object a multipart upload of these
/// parts made: the md5 of their md5s, a dash, their count.
pub(super) fn multipart_etag(parts: &[[u8; 16]]) -> String {
    let mut whole = Md5::new();
    for part in parts {
        whole.update(part);
    }
    format!("{}-{}", hex::encode(whole.finalize()), parts.len())
}

/// What the hashes' threads made of the parts fed them.
struct Hashed {
    sha256: Oid,
    /// The md5 of each part, in order: what the store's ETags must be
    /// (none when they were known before).
    parts: Vec<[u8; 16]>,
    /// The md5 of the whole, when it was asked for.
    md5: Option<String>,
}

/// The object's sha256, its parts' md5s and (when not known before) its
/// whole md5, each on a thread of the blocking pool of its own, fed the
/// parts in the object's order: no hash waits for another, nor a part's
/// upload for any.
struct Hashing {
    sha: Chain<Sha256>,
    parts: Option<Chain<Vec<[u8; 16]>>>,
    md5: Option<Chain<Md5>>,
}

/// Where a hash's thread is fed, and the thread.
type Chain<T> = (mpsc::Sender<Bytes>, JoinHandle<T>);

impl Hashing {
    fn start(whole_md5: bool, part_md5s: bool) -> Hashing {
        Hashing {
            sha: chain(Sha256::new(), |h, b| sha2::Digest::update(h, b)),
            parts: part_md5s.then(|| chain(Vec::new(), |md5s, b| md5s.push(Md5::digest(b).into()))),
            md5: whole_md5.then(|| chain(Md5::new(), |h, b| h.update(b))),
        }
    }

    /// What hands every hash the next part.
    fn feeder(&self) -> Feeder {
        Feeder {
            to: [
                Some(self.sha.0.clone()),
                self.parts.as_ref().map(|(tx, _)| tx.clone()),
                self.md5.as_ref().map(|(tx, _)| tx.clone()),
            ],
        }
    }

    /// The hashes of every part fed; `None` when a thread did not finish
    /// (the runtime shutting down).
    async fn finish(self) -> Option<Hashed> {
        let Hashing { sha, parts, md5 } = self;
        let (sha_in, sha) = sha;
        drop(sha_in);
        let parts = match parts {
            Some((parts_in, parts)) => {
                drop(parts_in);
                parts.await.ok()?
            }
            None => Vec::new(),
        };
        let md5 = match md5 {
            Some((md5_in, md5)) => {
                drop(md5_in);
                Some(hex::encode(md5.await.ok()?.finalize()))
            }
            None => None,
        };
        Some(Hashed {
            sha256: Oid::from_digest(sha2::Digest::finalize(sha.await.ok()?).into()),
            parts,
            md5,
        })
    }
}

/// Hands a part to every hash's thread.
struct Feeder {
    to: [Option<mpsc::Sender<Bytes>>; 3],
}

impl Feeder {
    /// Hands `part` (the next in the object's order) to each; waits while
    /// HASH_QUEUE parts are ahead of it.
    async fn feed(self, part: Bytes) {
        // A thread gone (it cannot panic) only leaves its hash short, and
        // the whole is then refused as another object.
        for to in self.to.iter().flatten() {
            let _ = to.send(part.clone()).await;
        }
    }
}

/// A hash `state` fed by `update` with every part sent to it, in order, on
/// a blocking thread; the state once the sender is dropped.
fn chain<T: Send + 'static>(
    mut state: T,
    update: fn(&mut T, &[u8]),
) -> (mpsc::Sender<Bytes>, JoinHandle<T>) {
    let (parts, mut queue) = mpsc::channel::<Bytes>(HASH_QUEUE);
    let thread = tokio::task::spawn_blocking(move || {
        while let Some(part) = queue.blocking_recv() {
            update(&mut state, &part);
        }
        state
    });
    (parts, thread)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_multipart_etag_is_the_md5_of_the_parts_md5s_and_their_count() {
        let parts: Vec<[u8; 16]> = [&b"first part"[..], b"second"]
            .iter()
            .map(|p| Md5::digest(p).into())
            .collect();
        let mut joined = Vec::new();
        joined.extend_from_slice(&parts[0]);
        joined.extend_from_slice(&parts[1]);
        assert_eq!(
            multipart_etag(&parts),
            format!("{}-2", hex::encode(Md5::digest(&joined)))
        );
        // Not the md5 of the whole, which a single PUT's ETag is.
        assert_ne!(
            multipart_etag(&parts[..1]),
            hex::encode(Md5::digest(b"first part"))
        );
    }
}
