//! Server-side copies into an object remote, verified: the source must
//! still be the version that was added (size and ETag, by HEAD and by the
//! copy's own conditions), a destination that already holds the object
//! whole (its `x-amz-meta-sha256`) is left alone, and the copy is one
//! CopyObject or parts within S3's 10,000-part limit. No byte crosses this
//! machine.

use super::Remote;
use super::UploadOptions;
use crate::pool::Oid;
use crate::stores::{CopySource, ObjectLayout, RemoteError, S3Client, SHA256_META};

/// What [`Remote::copy_verified`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyOutcome {
    /// The destination held the object already.
    Present,
    Copied,
    /// The source is not the version that was added (changed, or gone):
    /// nothing was written. The reason says what it is now.
    SourceChanged(String),
    /// Could not be done now (the store unreachable, an odd answer).
    Failed(String),
}

impl Remote {
    /// Copies `src` (pinned to its ETag, when it has one) to where `layout`
    /// keeps object `oid`, with the oid as its `x-amz-meta-sha256`, unless
    /// it is there: in one CopyObject up to `opts.copy_whole_max`, else in
    /// parts.
    pub async fn copy_verified(
        &self,
        src: &CopySource<'_>,
        layout: &ObjectLayout,
        oid: Oid,
        opts: UploadOptions,
    ) -> CopyOutcome {
        let client = match self.s3() {
            Ok(c) => c,
            Err(e) => return CopyOutcome::Failed(e.to_string()),
        };
        if let Err(outcome) = still_as_added(&client, src).await {
            return outcome;
        }
        let (hex, dest) = (oid.to_hex(), layout.key(&oid));
        if let Ok(Some(there)) = client.head(&layout.bucket, &dest).await {
            if holds_the_source(&client, layout, oid, src, &there) {
                return CopyOutcome::Present;
            }
        }
        let meta = [(SHA256_META, hex.as_str())];
        let copied = if src.size <= opts.copy_whole_max {
            client.copy(src, &layout.bucket, &dest, &meta).await
        } else {
            let part_size = copy_part_size(src.size, opts.part_size);
            client
                .copy_in_parts(src, &layout.bucket, &dest, part_size, &meta)
                .await
        };
        let source = format!("s3://{}/{}", src.bucket, src.key);
        match copied {
            Ok(meta) if meta.size == src.size => {
                client.record_sent(&layout.bucket, &dest, oid, &meta);
                CopyOutcome::Copied
            }
            Ok(meta) => CopyOutcome::Failed(format!(
                "the copy of {source} has {} bytes, not {}",
                meta.size, src.size
            )),
            Err(RemoteError::Http { status: 412, .. }) => CopyOutcome::SourceChanged(format!(
                "{source} changed since it was added (its ETag is no longer {})",
                src.etag.unwrap_or_default()
            )),
            Err(e) => CopyOutcome::Failed(e.to_string()),
        }
    }
}

/// Whether the destination `there` is shown to hold the object (the
/// caller copies only a source whose bytes were read and hashed here): the
/// ETag this daemon recorded for the key, or the source's own MD5 ETag,
/// which a single CopyObject keeps. Its `x-amz-meta-sha256` is a claim
/// anyone who can write the bucket can make, and is not looked at.
fn holds_the_source(
    client: &S3Client,
    layout: &ObjectLayout,
    oid: Oid,
    src: &CopySource<'_>,
    there: &crate::stores::ObjectMeta,
) -> bool {
    if there.size != src.size {
        return false;
    }
    let same_md5 = match (src.etag, there.etag.as_deref()) {
        (Some(a), Some(b)) => {
            let a = a.trim_matches('"');
            crate::stores::is_content_etag(a) && !a.contains('-') && a.eq_ignore_ascii_case(b)
        }
        _ => false,
    };
    same_md5 || client.sent_here(&layout.bucket, &layout.key(&oid), oid, there)
}

/// Whether the source still has the size and ETag it was added with; the
/// outcome to return when not.
async fn still_as_added(client: &S3Client, src: &CopySource<'_>) -> Result<(), CopyOutcome> {
    let source = format!("s3://{}/{}", src.bucket, src.key);
    match client.head(src.bucket, src.key).await {
        Ok(Some(now))
            if now.size == src.size && (src.etag.is_none() || now.etag.as_deref() == src.etag) =>
        {
            Ok(())
        }
        Ok(Some(now)) => Err(CopyOutcome::SourceChanged(format!(
            "{source} changed since it was added: {} bytes, ETag {}; it was {} bytes, ETag {}",
            now.size,
            now.etag.unwrap_or_default(),
            src.size,
            src.etag.unwrap_or_default()
        ))),
        Ok(None) => Err(CopyOutcome::SourceChanged(format!("{source} is gone"))),
        Err(e) => Err(CopyOutcome::Failed(e.to_string())),
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
