//! Prefetch: what a background worker does with a job of the registry's
//! queue ([`crate::registry::Registry::claim`]), ahead of any push.
//!
//! One prefetch: download a foreign object into the pool, hashing it in the
//! same pass (sha256 and md5: the md5 checks a single-part S3 ETag, and DRS
//! and Indexd records carry it), then HEAD it again: an object changed on
//! the server meanwhile is reported and nothing is kept.
//!
//! An ETag that the bytes cannot be checked against (nginx's
//! `mtime-size`, a multipart `-N` ETag without its part size) does not
//! prove that ranges fetched at different times are of one version: such a
//! download is also pinned to the `Last-Modified` recorded by add-url, in
//! every answer that states one and in the HEAD at the end. What even that
//! cannot see is in docs/add-url.md.

use std::sync::Arc;
use std::time::Duration;

use crate::pool::{Oid, Pool, PoolError};
use crate::registry::ForeignObject;
use crate::remote::{
    fetch_into_pool, Fetch, FetchError, FetchOptions, ObjectUrl, Origin, Permanence, Remote,
    RemoteError, ResolveError,
};

#[derive(Debug, thiserror::Error)]
pub enum PrefetchError {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error("{object} changed on the server during the prefetch: {why}; nothing was kept")]
    Changed { object: String, why: String },
    /// A `drs://` object whose DRS record or access URL could not be read.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(
        "{object}: its bytes have md5 {got}, its DRS record says {expected}; nothing was kept"
    )]
    Md5 {
        object: String,
        expected: String,
        got: String,
    },
}

/// Tries in all for a job whose bytes did not match what was recorded (an
/// md5 or multipart ETag, the size, the ETag pinned at add-url): bytes
/// garbled on the way, or a store caught mid-update, may pass; an object
/// that changed for good will not, and its job must end.
pub const MISMATCH_TRIES: u32 = 3;

impl PrefetchError {
    /// How many tries in all a job failing this way gets before it is
    /// `failed` for good; `None` when it is retried (with backoff) until it
    /// succeeds: a store down, a disk full, a connection that broke. An
    /// error no retry can mend ([`Permanence::Permanent`]: a 404, 403, an
    /// unknown host, TLS to a plain port) gets one.
    pub fn max_tries(&self) -> Option<u32> {
        let remote = |e: &RemoteError| (e.permanence() == Permanence::Permanent).then_some(1);
        match self {
            PrefetchError::Remote(e) => remote(e),
            PrefetchError::Changed { .. } | PrefetchError::Md5 { .. } => Some(MISMATCH_TRIES),
            PrefetchError::Pool(_) => None,
            PrefetchError::Resolve(r) => match r {
                ResolveError::Drs(d) => (d.permanence() == Permanence::Permanent).then_some(1),
                ResolveError::Remote(e) => remote(e),
                ResolveError::Fetch(_) => None,
                ResolveError::Disagrees { .. } | ResolveError::Nested { .. } => Some(1),
            },
            // Every kind named, so a new one has to be placed here.
            PrefetchError::Fetch(f) => match f {
                FetchError::Remote(e) => remote(e),
                FetchError::Changed { .. }
                | FetchError::Mismatch { .. }
                | FetchError::Answer { .. } => Some(MISMATCH_TRIES),
                FetchError::Short { .. }
                | FetchError::NoRanges { .. }
                | FetchError::Pool(_)
                | FetchError::Io(_)
                | FetchError::NoPartialDir => None,
            },
        }
    }
}

/// What a prefetch learned of the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hashed {
    pub oid: Oid,
    pub md5: [u8; 16],
}

/// Fetches `object` into the pool and returns its hashes.
pub async fn prefetch(
    pool: Arc<Pool>,
    remote: &Remote,
    object: &ForeignObject,
    opts: FetchOptions,
    part_size: Option<u64>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Hashed, PrefetchError> {
    let (url, headers) = match ObjectUrl::parse(object.url.expose())? {
        ObjectUrl::Drs(uri) => {
            let access = remote.access(&uri).await?;
            (access.url, access.headers)
        }
        plain => (plain, Vec::new()),
    };
    let located = remote.locate(&url)?;
    let origin = located.origin(&headers);
    let etag = Some(object.etag.as_str()).filter(|e| !e.is_empty());
    let part_size = part_size.filter(|_| etag.is_some_and(crate::registry::is_content_etag));
    let last_modified = pinned_last_modified(object, part_size);
    let req = Fetch {
        origin,
        size: object.size,
        etag,
        last_modified,
        expect: None,
        // Checks a single-part S3 ETag, which is the md5 of the content.
        md5: true,
        // A multipart S3 ETag is checkable when its part size is configured.
        part_size,
    };
    let fetched = fetch_into_pool(pool.clone(), req, opts, progress).await?;
    let oid = fetched.put.oid;
    if let Err(why) = unchanged(&origin, object, last_modified).await? {
        if fetched.put.stored {
            let pool = pool.clone();
            let _ = crate::blocking(move || pool.delete(&oid)).await;
        }
        return Err(PrefetchError::Changed {
            object: origin.describe(),
            why,
        });
    }
    let md5 = fetched.md5.expect("asked for");
    if let Some(expected) = object.md5.as_deref() {
        let got = hex::encode(md5);
        if !got.eq_ignore_ascii_case(expected) {
            if fetched.put.stored {
                let pool = pool.clone();
                let _ = crate::blocking(move || pool.delete(&oid)).await;
            }
            return Err(PrefetchError::Md5 {
                object: origin.describe(),
                expected: expected.to_string(),
                got,
            });
        }
    }
    Ok(Hashed { oid, md5 })
}

/// The `Last-Modified` a download of `object` is pinned to: the one
/// recorded when it was added, unless its ETag is checked against the bytes
/// (an MD5, or a multipart ETag whose part size is known). A copy of the
/// same bytes made later has a new date and the same MD5: it is not a
/// change that matters.
fn pinned_last_modified(object: &ForeignObject, part_size: Option<u64>) -> Option<&str> {
    let etag = object.etag.as_str();
    let checked =
        crate::registry::is_content_etag(etag) && (!etag.contains('-') || part_size.is_some());
    (!checked)
        .then_some(object.last_modified.as_deref())
        .flatten()
}

/// Whether the store still has the version that was fetched: its size,
/// ETag and, when pinned, `Last-Modified`.
async fn unchanged(
    origin: &Origin<'_>,
    object: &ForeignObject,
    last_modified: Option<&str>,
) -> Result<Result<(), String>, RemoteError> {
    let Some(now) = origin.head().await? else {
        return Ok(Err("it is gone".into()));
    };
    if now.size != object.size {
        return Ok(Err(format!(
            "it now has {} bytes, not {}",
            now.size, object.size
        )));
    }
    let tag = now.etag.unwrap_or_default();
    if !object.etag.is_empty() && tag != object.etag {
        return Ok(Err(format!("its ETag is now {tag}, not {}", object.etag)));
    }
    if let (Some(was), Some(now)) = (last_modified, now.last_modified.as_deref()) {
        if was.trim() != now.trim() {
            return Ok(Err(format!(
                "its Last-Modified is now {now}, not {was}: another version under the same ETag"
            )));
        }
    }
    Ok(Ok(()))
}

/// How long to wait before try `attempts + 1`: `first`, doubling, at most an hour.
pub fn backoff(first: Duration, attempts: u32) -> Duration {
    first
        .saturating_mul(1 << attempts.min(16))
        .min(Duration::from_secs(3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_no_retry_can_mend_end_the_job_and_mismatches_get_three_tries() {
        let http = |status| {
            PrefetchError::Fetch(FetchError::Remote(RemoteError::Http {
                op: "GET",
                object: "https://h/x".into(),
                status,
                code: String::new(),
                tries: String::new(),
            }))
        };
        assert_eq!(http(404).max_tries(), Some(1));
        assert_eq!(http(403).max_tries(), Some(1));
        assert_eq!(http(503).max_tries(), None);
        let mismatch = PrefetchError::Fetch(FetchError::Mismatch {
            object: "s3://b/k".into(),
            what: "md5 (the ETag)",
            expected: "a".into(),
            got: "b".into(),
        });
        assert_eq!(mismatch.max_tries(), Some(MISMATCH_TRIES));
        let changed = PrefetchError::Changed {
            object: "s3://b/k".into(),
            why: "it is gone".into(),
        };
        assert_eq!(changed.max_tries(), Some(MISMATCH_TRIES));
        let broke = PrefetchError::Fetch(FetchError::Short {
            object: "s3://b/k".into(),
            why: "the body broke off".into(),
        });
        assert_eq!(broke.max_tries(), None);
        let bad_url = PrefetchError::Remote(RemoteError::BadUrl {
            url: "x".into(),
            why: "no".into(),
        });
        assert_eq!(bad_url.max_tries(), Some(1));
    }

    #[test]
    fn backoff_doubles_up_to_an_hour() {
        let s = Duration::from_secs;
        assert_eq!(backoff(s(30), 0), s(30));
        assert_eq!(backoff(s(30), 2), s(120));
        assert_eq!(backoff(s(30), 40), s(3600));
    }
}
