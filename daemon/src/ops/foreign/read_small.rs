//! Small objects read during add-url itself, where the prefetch would
//! read them moments later anyway.
//!
//! An object the pool keeps in its small tier costs one GET, no more than
//! its HEAD did. Through the prefetch it would also cost a queued job, a
//! claim and a finish (a registry transaction each), then a second pointer
//! write, a second staging and a mirror rewrite when it is promoted: for
//! 1,000 objects of 4 KiB, most of the time from add-url to promoted. Read
//! now, through the prefetch's own checks (the ETag's md5 where it is one,
//! the size, the version the HEAD saw), its pointer is written with the
//! content's sha256 from the start, as `git annex addurl` without `--fast`
//! or `dvc import-url` would have it. Nothing is read with `--no-fetch`.
//!
//! An object that cannot be read now keeps its provisional oid, and the
//! workers fetch it as any other: the failed read counts as its job's
//! first try (a 404 is not asked twice, a mismatch gets no extra try), with
//! the reason shown by `drsctl status`. Nothing is lost by trying.

use futures_util::stream::{self, StreamExt};

use super::resolve::{OidFrom, Resolved};
use super::ForeignObjects;
use crate::ops::workers::prefetch::{failure_reason, next_try, read_small, Hashed, PrefetchError};
use crate::pool::{Oid, Tier};
use crate::stores::RemoteError;

/// GETs in flight at once, as for the HEADs: small objects are round
/// trips, not bandwidth.
const CONCURRENT_READS: usize = 32;

/// Objects read before their bytes go into the pool in one transaction
/// (a commit per batch instead of one per object), at most this many...
const BATCH: usize = 256;

/// ...and this many bytes, however high the pool's threshold was set: the
/// memory a batch holds.
const BATCH_BYTES: u64 = 32 << 20;

/// A read that failed, as its job's first try: the object's provisional
/// oid, why (redacted), and when it is tried again (`None`: never, as for
/// a 404).
pub(super) type FailedRead = (Oid, String, Option<u64>);

/// What one read gave.
type Read = Result<(Hashed, Vec<u8>), PrefetchError>;

impl ForeignObjects {
    /// Reads the resolved objects worth reading now (see the module's
    /// notes) into the pool, and gives each read one its content oid; the
    /// others, and those that could not be read, come back as they were.
    /// Also returns the reads that failed.
    pub(super) async fn read_small(
        &self,
        resolved: Vec<Resolved>,
    ) -> (Vec<Resolved>, Vec<FailedRead>) {
        let (mut out, mut failed) = (Vec::with_capacity(resolved.len()), Vec::new());
        let (mut to_read, mut rest) = (Vec::new(), Vec::new());
        for r in resolved {
            match self.worth_reading(&r) {
                true => to_read.push(r),
                false => rest.push(r),
            }
        }
        let reads = to_read.len();
        let mut to_read = to_read.into_iter().peekable();
        while to_read.peek().is_some() {
            let batch = next_batch(&mut to_read);
            let read: Vec<(Resolved, Read)> = stream::iter(batch)
                .map(|r| async move {
                    let read = self.read_one(&r).await;
                    (r, read)
                })
                .buffered(CONCURRENT_READS)
                .collect()
                .await;
            self.keep(read, &mut out, &mut failed).await;
        }
        log::debug!(
            "add-url: {reads} small objects to read, {} could not be",
            failed.len()
        );
        out.extend(rest);
        out.sort_by_key(|r| r.target.no);
        (out, failed)
    }

    /// One object read whole, its access URL asked first for a `drs://`
    /// one, within the `metadata_timeout` setting: the read timeout alone
    /// lets a server trickling a byte a second hold add-url (and its
    /// repo's lock) forever. A small object is a short whole body like a
    /// JSON answer, so a whole-answer deadline fits it; one that misses it
    /// is left to the prefetch, as any failed read.
    async fn read_one(&self, r: &Resolved) -> Read {
        let deadline = self.remote.metadata_timeout();
        match tokio::time::timeout(deadline, read_small(&self.remote, &r.entry.object)).await {
            Ok(read) => read,
            Err(_) => Err(PrefetchError::Remote(RemoteError::Deadline {
                op: "GET",
                // Shown redacted: a signed URL's query is a secret.
                object: r.target.url.to_string(),
                deadline,
            })),
        }
    }

    /// An object whose content oid nobody gave, that goes to the pool's
    /// small tier, and that the prefetch would fetch (not over its limit).
    fn worth_reading(&self, r: &Resolved) -> bool {
        let o = &r.entry.object;
        o.content_oid.is_none()
            && self.pool.tier_for(o.size) == Tier::Kv
            && self.max_size.is_none_or(|max| o.size <= max)
    }

    /// Puts a batch's bytes into the pool in one transaction and names each
    /// object by its sha256; a failed read goes to `failed` as its job's
    /// first try. When the pool cannot take them, the objects stay
    /// provisional for the workers, which will say why.
    async fn keep(
        &self,
        read: Vec<(Resolved, Read)>,
        out: &mut Vec<Resolved>,
        failed: &mut Vec<FailedRead>,
    ) {
        let mut good: Vec<(Resolved, Hashed, Vec<u8>)> = Vec::new();
        for (r, outcome) in read {
            match outcome {
                Ok((hashed, bytes)) if hashed.unverified.is_none() => good.push((r, hashed, bytes)),
                // Its ETag could not be checked against the bytes: the
                // worker fetches it again and records why, for `drsctl
                // status`.
                Ok(_) => out.push(r),
                Err(e) => {
                    failed.push(self.failure(&r, &e));
                    out.push(r);
                }
            }
        }
        if good.is_empty() {
            return;
        }
        let bodies: Vec<(Oid, Vec<u8>)> = good
            .iter_mut()
            .map(|(_, h, b)| (h.oid, std::mem::take(b)))
            .collect();
        let pool = self.pool.clone();
        let put = crate::blocking(move || {
            let entries: Vec<(Oid, &[u8])> =
                bodies.iter().map(|(o, b)| (*o, b.as_slice())).collect();
            pool.put_many(&entries).map(|_| ())
        })
        .await;
        if let Err(e) = put {
            log::warn!("add-url: the pool could not take {} small objects read now; left to the prefetch: {e}", good.len());
            out.extend(good.into_iter().map(|(r, _, _)| r));
            return;
        }
        for (mut r, hashed, _) in good {
            let object = &mut r.entry.object;
            object.content_oid = Some(hashed.oid);
            object.content_read = true;
            object.md5 = object.md5.take().or(hashed.md5.map(hex::encode));
            r.entry.oid = hashed.oid;
            r.oid_from = OidFrom::Hashed;
            log::info!("read {} at add-url: sha256 {}", r.target.url, hashed.oid);
            out.push(r);
        }
    }

    /// A failed read as its job's first try.
    fn failure(&self, r: &Resolved, e: &PrefetchError) -> FailedRead {
        let why = failure_reason(e, self.pool.dir());
        log::info!(
            "add-url: {} not read now, left to the prefetch: {why}",
            r.target.url
        );
        let again = next_try(e, 1, self.retry);
        (r.entry.object.provisional_oid, why, again)
    }
}

/// The next objects to read: one at least, then up to [`BATCH`] of them
/// and [`BATCH_BYTES`] in all.
fn next_batch(rest: &mut std::iter::Peekable<std::vec::IntoIter<Resolved>>) -> Vec<Resolved> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    while let Some(next) = rest.peek() {
        let size = next.entry.object.size;
        let full = batch.len() == BATCH || bytes + size > BATCH_BYTES;
        if !batch.is_empty() && full {
            break;
        }
        bytes += size;
        batch.extend(rest.next());
    }
    batch
}
