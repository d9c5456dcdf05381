//! Prefetch: what a background worker does with a job of the registry's
//! queue ([`crate::registry::Registry::claim`]), ahead of any push.
//!
//! One prefetch: download a foreign object into the pool, hashing it in the
//! same pass, then HEAD it again: an object changed on the server meanwhile
//! is reported and nothing is kept. sha256 always; md5 only when it checks
//! something (a single-part S3 ETag, a DRS record's md5), on its own
//! thread; a multipart `-N` ETag is checked with the parts' md5s, its part
//! size chosen per object (`remote::parts`). An Indexd registration that
//! wants the md5 later reads it from the pool then, off this path. A small object fetched in one answer that named the
//! pinned ETag (and `Last-Modified`) is of that one version already: no HEAD.
//!
//! An ETag that the bytes cannot be checked against (nginx's
//! `mtime-size`, a multipart `-N` ETag whose parts count no part size
//! fits) does not prove that ranges fetched at different times are of one
//! version: such a download is also pinned to the `Last-Modified` recorded
//! by add-url, in every answer that states one and in the HEAD at the end.
//! What even that cannot see is in docs/add-url.md.

use std::sync::Arc;
use std::time::Duration;

use crate::pool::{Oid, Pool, PoolError};
use crate::registry::ForeignObject;
use crate::remote::{
    fetch_into_pool, parts, Fetch, FetchError, FetchOptions, Origin, Remote, ResolveError,
};
use crate::stores::{ObjectUrl, Permanence, RemoteError};

#[derive(Debug, thiserror::Error)]
pub enum PrefetchError {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error("{object} changed on the server during the prefetch: {why}; nothing was kept")]
    Changed { object: String, why: VersionChange },
    /// A `drs://` object whose DRS record or access URL could not be read.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(
        "{object}: its bytes have md5 {got}, its DRS record (or the manifest it was added from) says {expected}; nothing was kept"
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
        // A full pool disk does not pass while drsd waits: the job ends at
        // once with a `no_space` reason ([`failure_reason`]) that a waiter
        // sees, and is queued again at the next start, or by `drsctl
        // fetch` / `promote --retry`, once the user made room.
        if crate::io_error::out_of_space(self) {
            return Some(1);
        }
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
                ResolveError::NoWay { transient, .. } => (!transient).then_some(1),
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
                | FetchError::NoPartialDir
                | FetchError::NotOurs(_) => None,
            },
        }
    }
}

/// What a prefetch learned of the content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hashed {
    pub oid: Oid,
    /// Computed only when it checked something.
    pub md5: Option<[u8; 16]>,
    /// Why the object's ETag could not be checked against its bytes, when
    /// it is of the kind that can be (`multipart ETag not verifiable: …`).
    pub unverified: Option<String>,
}

/// How the bytes of an object are checked beyond their size and version.
#[derive(Debug, Default, PartialEq, Eq)]
struct Checks {
    md5: bool,
    part_sizes: Vec<u64>,
    unverified: Option<String>,
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
    let (url, headers) = source(remote, object).await?;
    let located = remote.locate(&url)?;
    let origin = located.origin(&headers);
    let checks = checks(&origin, object, part_size).await;
    let req = request(origin, object, &checks);
    let fetched = fetch_into_pool(pool.clone(), req.clone(), opts, progress).await?;
    let oid = fetched.put.oid;
    let confirmed = confirm(&req, object, fetched.one_version, fetched.md5).await;
    if confirmed.is_err() && fetched.put.stored {
        let pool = pool.clone();
        let _ = crate::blocking(move || pool.delete(&oid)).await;
    }
    confirmed?;
    Ok(Hashed {
        oid,
        md5: fetched.md5,
        unverified: checks.unverified,
    })
}

/// Reads `object`, small enough for the pool's kv tier, into memory with
/// the checks of [`prefetch`], for the caller to put into the pool (many
/// in one transaction: add-url's reads).
pub async fn read_small(
    remote: &Remote,
    object: &ForeignObject,
) -> Result<(Hashed, Vec<u8>), PrefetchError> {
    let (url, headers) = source(remote, object).await?;
    let located = remote.locate(&url)?;
    let origin = located.origin(&headers);
    let checks = checks(&origin, object, None).await;
    let req = request(origin, object, &checks);
    let body = crate::remote::read_small(&req).await?;
    confirm(&req, object, body.one_version, body.md5).await?;
    let hashed = Hashed {
        oid: body.oid,
        md5: body.md5,
        unverified: checks.unverified,
    };
    Ok((hashed, body.bytes))
}

/// Where `object`'s bytes are read: its URL, or for a `drs://` one the
/// access URL its DRS server gives now, with the headers to send.
async fn source(
    remote: &Remote,
    object: &ForeignObject,
) -> Result<(ObjectUrl, Vec<(String, String)>), PrefetchError> {
    Ok(match ObjectUrl::parse(object.url.expose())? {
        ObjectUrl::Drs(uri) => {
            let access = remote.access(&uri).await?;
            (access.url, access.headers)
        }
        plain => (plain, Vec::new()),
    })
}

/// The download of `object` from `origin`, pinned to what add-url saw and
/// checked as `checks` says.
fn request<'a>(origin: Origin<'a>, object: &'a ForeignObject, checks: &'a Checks) -> Fetch<'a> {
    if let Some(why) = &checks.unverified {
        log::info!("{}: {why}", origin.describe());
    }
    Fetch {
        origin,
        size: object.size,
        etag: Some(object.etag.as_str()).filter(|e| !e.is_empty()),
        last_modified: pinned_last_modified(object, checks),
        // A content oid recorded before any read is a claim (a checksum
        // header, `--sha256`, a DRS record): the bytes must bear it out.
        expect: object.content_oid.filter(|_| !object.content_read),
        md5: checks.md5,
        part_sizes: &checks.part_sizes,
    }
}

/// What is checked once the bytes are in: that the store still has the
/// version fetched, unless one answer pinned to it brought them all (ranges,
/// maybe of several tries, need the second look), and a DRS record's md5.
async fn confirm(
    req: &Fetch<'_>,
    object: &ForeignObject,
    one_version: bool,
    md5: Option<[u8; 16]>,
) -> Result<(), PrefetchError> {
    if !one_version {
        if let Err(why) = unchanged(&req.origin, object, req.last_modified).await? {
            return Err(PrefetchError::Changed {
                object: req.origin.describe(),
                why,
            });
        }
    }
    if let (Some(expected), Some(md5)) = (object.md5.as_deref(), md5) {
        let got = hex::encode(md5);
        if !got.eq_ignore_ascii_case(expected) {
            return Err(PrefetchError::Md5 {
                object: req.origin.describe(),
                expected: expected.to_string(),
                got,
            });
        }
    }
    Ok(())
}

/// What checks the bytes of `object`: md5 for a single-part S3 ETag (the
/// md5 of the content) or a DRS md5; the parts' md5s, in the part sizes
/// that fit its parts count, for a multipart ETag (`configured`, the
/// `DRSD_MULTIPART_PART_SIZE` override, first).
///
/// A multipart ETag no part size fits is not a reason to hold the object
/// or to fail its job: no retry could make it fit, and a failing job would
/// download it again on every try. It is fetched with the ETag check
/// skipped, pinned to its `Last-Modified` as an object without a content
/// ETag is (nginx's), and its bytes are trusted as read, which is what
/// every such object gets; `drsctl status` names it, so the steward knows
/// its provisional oid was linked to the bytes by the version pin alone.
async fn checks(origin: &Origin<'_>, object: &ForeignObject, configured: Option<u64>) -> Checks {
    let etag = object.etag.as_str();
    let drs_md5 = object.md5.is_some();
    if !crate::stores::is_content_etag(etag) {
        return Checks {
            md5: drs_md5,
            ..Checks::default()
        };
    }
    let Some(count) = parts::parts_of(etag) else {
        return Checks {
            md5: true,
            ..Checks::default()
        };
    };
    let size = object.size;
    let fits = |p: &u64| parts::fits(size, count, *p);
    let stated = match configured.filter(fits) {
        Some(_) => None,
        None => stated_part_size(origin, count).await,
    };
    match parts::candidates(size, count, configured, stated) {
        Ok(part_sizes) => Checks {
            md5: drs_md5,
            part_sizes,
            unverified: None,
        },
        Err(why) => Checks {
            md5: drs_md5,
            part_sizes: Vec::new(),
            unverified: Some(format!("multipart ETag not verifiable: {why}")),
        },
    }
}

/// Part 1's length, when the store states it for an upload of `count`
/// parts (AWS S3 does, RGW does not). A failed HEAD only means the common
/// sizes are tried instead: the download's own requests report errors.
async fn stated_part_size(origin: &Origin<'_>, count: u64) -> Option<u64> {
    let Origin::S3 {
        client,
        bucket,
        key,
    } = origin
    else {
        return None; // a plain URL's signature would not cover `partNumber`
    };
    match client.head_part(bucket, key, 1).await {
        Ok(Some((len, parts))) if parts == count => Some(len),
        Ok(_) => None,
        Err(e) => {
            log::debug!("asking s3://{bucket}/{key} for its part size: {e}");
            None
        }
    }
}

/// The `Last-Modified` a download of `object` is pinned to: the one
/// recorded when it was added, unless its ETag is checked against the bytes
/// (an MD5, or a multipart ETag with part sizes to try). A copy of the
/// same bytes made later has a new date and the same MD5: it is not a
/// change that matters.
fn pinned_last_modified<'a>(object: &'a ForeignObject, checks: &Checks) -> Option<&'a str> {
    let etag = object.etag.as_str();
    let checked = crate::stores::is_content_etag(etag)
        && (!etag.contains('-') || !checks.part_sizes.is_empty());
    (!checked)
        .then_some(object.last_modified.as_deref())
        .flatten()
}

/// How the object at a URL is no longer the version that was fetched: the
/// `why` of [`PrefetchError::Changed`], which names the object.
#[derive(Debug, thiserror::Error)]
pub enum VersionChange {
    #[error("it is gone")]
    Gone,
    #[error("it now has {now} bytes, not {was}")]
    Size { now: u64, was: u64 },
    #[error("its ETag is now {now}, not {was}")]
    Etag { now: String, was: String },
    #[error("its Last-Modified is now {now}, not {was}: another version under the same ETag")]
    LastModified { now: String, was: String },
}

/// Whether the store still has the version that was fetched: its size,
/// ETag and, when pinned, `Last-Modified`.
async fn unchanged(
    origin: &Origin<'_>,
    object: &ForeignObject,
    last_modified: Option<&str>,
) -> Result<Result<(), VersionChange>, RemoteError> {
    let Some(now) = origin.head().await? else {
        return Ok(Err(VersionChange::Gone));
    };
    if now.size != object.size {
        return Ok(Err(VersionChange::Size {
            now: now.size,
            was: object.size,
        }));
    }
    let tag = now.etag.unwrap_or_default();
    if !object.etag.is_empty() && tag != object.etag {
        return Ok(Err(VersionChange::Etag {
            now: tag,
            was: object.etag.clone(),
        }));
    }
    if let (Some(was), Some(now)) = (last_modified, now.last_modified.as_deref()) {
        if was.trim() != now.trim() {
            return Ok(Err(VersionChange::LastModified {
                now: now.to_string(),
                was: was.to_string(),
            }));
        }
    }
    Ok(Ok(()))
}

/// How a job's failure to fetch into the pool at `pool_dir` starts when
/// the pool's disk was full: the wire's `no_space`, which the queue also
/// looks for to queue the job again at the next start.
pub const NO_SPACE_REASON: &str = "no_space";

/// The reason a job that failed with `error` is stored with (no secret in
/// it): a full pool disk says so first, naming the pool's folder and what
/// to do.
pub fn failure_reason(error: &PrefetchError, pool_dir: Option<&std::path::Path>) -> String {
    let why = crate::stores::redact_text(&error.to_string());
    if !crate::io_error::out_of_space(error) {
        return why;
    }
    let folder = pool_dir.map_or("the pool's folder".to_string(), |d| {
        format!("the pool's folder {}", d.display())
    });
    format!(
        "{NO_SPACE_REASON}: {folder} has no room for this object ({why}); free space there \
         (drsctl gc) or move the pool, then drsctl fetch (or promote --retry) tries again, \
         as drsd does when it starts"
    )
}

/// When a job that failed with `error` on its try number `tries` (from 1)
/// is tried again, in seconds since the epoch: after [`backoff`] from
/// `first`, or `None` when it has had all its tries
/// ([`PrefetchError::max_tries`]) and is failed for good.
pub fn next_try(error: &PrefetchError, tries: u32, first: Duration) -> Option<u64> {
    match error.max_tries() {
        Some(max) if tries >= max => None,
        _ => Some(crate::registry::now() + backoff(first, tries - 1).as_secs()),
    }
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
            why: VersionChange::Gone,
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
    fn a_full_pool_disk_ends_the_job_at_once_with_a_no_space_reason_naming_the_folder() {
        let full = PrefetchError::Fetch(FetchError::Io(crate::IoError::new(
            "write",
            "/p/pool/partial/x.part",
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        )));
        assert_eq!(full.max_tries(), Some(1));
        assert_eq!(next_try(&full, 1, Duration::from_secs(30)), None);
        let why = failure_reason(&full, Some(std::path::Path::new("/p/pool")));
        assert!(why.starts_with(NO_SPACE_REASON), "{why}");
        assert!(
            why.contains("the pool's folder /p/pool") && why.contains("drsctl fetch"),
            "{why}"
        );
        assert_eq!(NO_SPACE_REASON, drsd_proto::ErrorCode::NoSpace.as_str());
        // Anything else keeps its own words.
        let broke = PrefetchError::Fetch(FetchError::Short {
            object: "s3://b/k".into(),
            why: "the body broke off".into(),
        });
        assert_eq!(failure_reason(&broke, None), broke.to_string());
    }

    #[test]
    fn backoff_doubles_up_to_an_hour() {
        let s = Duration::from_secs;
        assert_eq!(backoff(s(30), 0), s(30));
        assert_eq!(backoff(s(30), 2), s(120));
        assert_eq!(backoff(s(30), 40), s(3600));
    }
}
