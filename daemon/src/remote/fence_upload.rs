//! Uploads through Fence's signed URLs: one PUT of a small object
//! ([`put_whole`]), else a multipart upload ([`send_parts`]): parts of `upload_part_size`, read
//! ahead, a few on the wire at once, and hashed beside their upload (the
//! sha256 and the md5 each on a thread of its own, fed the parts in the
//! object's order); Fence completes the upload only once the whole is shown
//! to be the object. A part's bytes are one buffer, hashed and sent as
//! they are: what is hashed is what is sent.
//!
//! Each part the store took is recorded with the ETag it answered
//! (through a [`Recorder`]: the ops layer's journal, `registry/gen3/fence.rs`), so a push resumed after a kill sends only
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

use super::digest::{check_whole, multipart_etag, read_part, DigestError, Hashing};
use crate::blocking;
use crate::lfs::Pointer;
use crate::pool::{Blob, Oid};
use crate::stores::drs::{DrsError, Fence, FencePart};
use crate::stores::SecretUrl;

/// Parts of a multipart upload through Fence on the wire at once: the
/// next are read and sent while one is still going, at the memory of this
/// many parts (`upload_part_size`, 64 MiB by default).
const PARTS_AT_ONCE: usize = 3;
/// Parts read ahead of their sending, so that reading (page faults and a
/// copy out of the page cache), hashing and the wire overlap.
const READ_AHEAD: usize = 2;
/// Records a part the store took, so a resumed push sends only the rest.
/// Called off the async threads; a failure to record costs only that
/// part's resending after a kill, and is the recorder's to log.
pub type Recorder = Arc<dyn Fn(FencePart) + Send + Sync>;

/// What stopped an upload through Fence's signed URLs.
#[derive(Debug, thiserror::Error)]
pub enum FenceUploadError {
    #[error(transparent)]
    Fence(#[from] DrsError),
    #[error(transparent)]
    Digest(#[from] DigestError),
    #[error("the signed URL Fence gave for record {guid} names no bucket and key to record")]
    NoLocation { guid: String },
    #[error("the store answered no ETag for part {number} of object {oid}")]
    NoEtag { number: u32, oid: Oid },
    #[error("the store answered for part {number} of object {oid} an ETag that is not the md5 of the bytes sent")]
    PartNotStored { number: u32, oid: Oid },
}

/// A multipart upload open in the commons' bucket, and the parts of it
/// recorded as sent (number to the ETag the store answered).
pub struct OpenUpload {
    pub guid: String,
    pub upload_id: String,
    /// The object's key in the bucket: `guid/file_name`.
    pub key: String,
    pub sent: BTreeMap<u32, String>,
}

/// What a multipart upload ends with: the record's guid, the object's
/// location (from a part's signed URL), the md5 of the whole (when it was
/// not known before) and the ETag the store must now answer for it.
pub struct Sent {
    pub guid: String,
    pub location: Option<String>,
    pub md5: Option<String>,
    /// `md5(md5(part 1) .. md5(part N))-N`, of the bytes sent.
    pub etag: String,
}

/// The object to send and what is known of it.
pub struct Source<'a> {
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

/// Where one PUT of a whole object went, and its md5 (its ETag).
pub struct PutWhole {
    /// `s3://bucket/key`.
    pub location: String,
    pub md5: String,
}

/// Sends `bytes`, object `oid`, in one PUT to `url`, which Fence signed for
/// record `guid` under `key` (`guid/file_name`). The bytes are shown to be
/// the object (and to have `md5`, when known) before they go, and the
/// store's ETag must be their md5.
pub async fn put_whole(
    fence: &Fence<'_>,
    (oid, md5): (Oid, Option<&str>),
    (guid, key): (&str, &str),
    url: &SecretUrl,
    bytes: Bytes,
) -> Result<PutWhole, FenceUploadError> {
    let md5 = check_whole(&bytes, oid, md5)?;
    let location = location_of(url, key).ok_or_else(|| FenceUploadError::NoLocation {
        guid: guid.to_string(),
    })?;
    let answered = fence.put(&format!("object {oid}"), url, bytes).await?;
    if answered.is_some_and(|etag| etag.to_ascii_lowercase() != md5) {
        return Err(FenceUploadError::PartNotStored { number: 1, oid });
    }
    Ok(PutWhole { location, md5 })
}

/// The parts of `source` into `open`: read READ_AHEAD at a time
/// (`buffered` keeps their order), handed in that order to the hashes'
/// threads (`then`), and up to PARTS_AT_ONCE of them on the wire. A
/// part `open` holds already is not sent again when its md5 is its
/// ETag. The whole must hash to the oid (and to the md5 known, if any)
/// before Fence is asked to complete the upload.
pub async fn send_parts(
    fence: &Fence<'_>,
    source: &Source<'_>,
    open: &OpenUpload,
    part_size: u64,
    record: Recorder,
) -> Result<Sent, FenceUploadError> {
    let pointer = source.pointer;
    let oid = pointer.oid;
    let part_size = part_size.max(1);
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
                let read = read_part(blob, offset, len).await;
                Ok::<_, FenceUploadError>((number, read.map_err(DigestError::Read)?))
            }
        })
        .buffered(READ_AHEAD)
        .then(|read| {
            let feeder = hashing.feeder();
            async move {
                let (number, bytes) = read?;
                let bytes = Bytes::from(bytes);
                feeder.feed(bytes.clone()).await;
                Ok::<_, FenceUploadError>((number, bytes))
            }
        })
        .map(|hashed| {
            let kept = &kept;
            let record = record.clone();
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
                    .ok_or(FenceUploadError::NoEtag { number, oid })?;
                let part = FencePart {
                    upload_id: open.upload_id.clone(),
                    key: open.key.clone(),
                    number,
                    etag: etag.clone(),
                };
                blocking(move || record(part)).await;
                Ok::<_, FenceUploadError>((number, etag, location))
            }
        })
        .buffered(PARTS_AT_ONCE)
        .try_collect()
        .await?;
    let hashed = hashing.finish().await.ok_or(DigestError::Stopped { oid })?;
    if hashed.sha256 != oid {
        let got = hashed.sha256;
        return Err(DigestError::NotTheObject { oid, got }.into());
    }
    let md5s = source.parts.map(<[_]>::to_vec).unwrap_or(hashed.parts);
    if md5s.len() != sent.len() {
        return Err(DigestError::Stopped { oid }.into());
    }
    for ((number, etag, _), md5) in sent.iter().zip(&md5s) {
        if etag.to_ascii_lowercase() != hex::encode(md5) {
            return Err(FenceUploadError::PartNotStored {
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

/// `etag`, the ETag recorded for a part, when it is the md5 of `bytes`,
/// the part's bytes now: the store holds these very bytes, and they are not
/// sent again.
async fn held(etag: Option<String>, bytes: Bytes) -> Option<String> {
    let etag = etag?;
    blocking(move || (etag == hex::encode(Md5::digest(&bytes))).then_some(etag)).await
}

/// The `s3://bucket/key` a signed PUT URL writes, `key` being what Fence
/// signs (`{guid}/{file_name}`): the path segment before the key is the
/// bucket (path-style, as Ceph RGW and most S3 stores sign, under any
/// prefix the store is mounted at), else the host's first label
/// (virtual-hosted). What the completed record names as the object's
/// location; never the URL itself, which carries its signature.
pub fn location_of(url: &SecretUrl, key: &str) -> Option<String> {
    let parsed = url::Url::parse(url.expose()).ok()?;
    let path: Vec<String> = parsed
        .path_segments()?
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let key_len = key.split('/').count();
    if path.len() < key_len || path[path.len() - key_len..].join("/") != key {
        return None;
    }
    let bucket = match path.len() - key_len {
        0 => parsed.host_str()?.split('.').next()?.to_string(),
        n => path[n - 1].clone(),
    };
    (!bucket.is_empty()).then(|| format!("s3://{bucket}/{key}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_location_of_a_signed_url_is_its_bucket_and_key_without_the_signature() {
        let path = SecretUrl::new(
            "http://127.0.0.1:8000/s3/bkt/dg.T/g-1/a%20b.bam?X-Amz-Signature=s3cr3t",
        );
        assert_eq!(
            location_of(&path, "dg.T/g-1/a b.bam").as_deref(),
            Some("s3://bkt/dg.T/g-1/a b.bam")
        );
        let hosted =
            SecretUrl::new("https://bkt.s3.us-east-1.amazonaws.com/g-1/x.bam?X-Amz-Signature=s");
        assert_eq!(
            location_of(&hosted, "g-1/x.bam").as_deref(),
            Some("s3://bkt/g-1/x.bam")
        );
        assert_eq!(location_of(&hosted, "g-2/x.bam"), None);
    }
}
