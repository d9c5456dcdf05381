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
use crate::pool::{Oid, Tier};
use crate::prefetch::{next_try, prefetch, Hashed};
use crate::remote::{redact_text, FetchOptions};

/// A read that failed, as its job's first try: the object's provisional
/// oid, why (redacted), and when it is tried again (`None`: never, as for
/// a 404).
pub(super) type FailedRead = (Oid, String, Option<u64>);

/// GETs in flight at once, as for the HEADs: small objects are round
/// trips, not bandwidth.
const CONCURRENT_READS: usize = 32;

impl ForeignObjects {
    /// Reads the resolved objects worth reading now (see the module's
    /// notes) into the pool, and gives each read one its content oid; the
    /// others, and those that could not be read, come back as they were.
    /// Also returns the reads that failed.
    pub(super) async fn read_small(
        &self,
        resolved: Vec<Resolved>,
    ) -> (Vec<Resolved>, Vec<FailedRead>) {
        let reads = resolved.iter().filter(|r| self.worth_reading(r)).count();
        if reads == 0 {
            return (resolved, Vec::new());
        }
        let outcomes: Vec<(Resolved, Option<FailedRead>)> = stream::iter(resolved)
            .map(|r| self.read_one(r))
            .buffered(CONCURRENT_READS)
            .collect()
            .await;
        let (read, failed): (Vec<Resolved>, Vec<Option<FailedRead>>) = outcomes.into_iter().unzip();
        let failed: Vec<FailedRead> = failed.into_iter().flatten().collect();
        log::debug!(
            "add-url: {reads} small objects to read, {} could not be",
            failed.len()
        );
        (read, failed)
    }

    /// An object whose content oid nobody gave, that goes to the pool's
    /// small tier, and that the prefetch would fetch (not over its limit).
    fn worth_reading(&self, r: &Resolved) -> bool {
        let o = &r.entry.object;
        o.content_oid.is_none()
            && self.pool.tier_for(o.size) == Tier::Kv
            && self.max_size.is_none_or(|max| o.size <= max)
    }

    async fn read_one(&self, mut r: Resolved) -> (Resolved, Option<FailedRead>) {
        if !self.worth_reading(&r) {
            return (r, None);
        }
        let object = &r.entry.object;
        let opts = FetchOptions::default();
        let read = prefetch(self.pool.clone(), &self.remote, object, opts, None, &|_| {}).await;
        match read {
            Ok(Hashed {
                oid,
                md5,
                unverified: None,
            }) => {
                let object = &mut r.entry.object;
                object.content_oid = Some(oid);
                object.md5 = object.md5.take().or(md5.map(hex::encode));
                r.entry.oid = oid;
                r.oid_from = OidFrom::Hashed;
                log::info!("read {} at add-url: sha256 {oid}", r.target.url);
            }
            // Its ETag could not be checked against the bytes: the worker
            // fetches it again and records why, for `drsctl status`.
            Ok(Hashed {
                unverified: Some(_),
                ..
            }) => {}
            Err(e) => {
                let why = redact_text(&e.to_string());
                let again = next_try(&e, 1, self.retry);
                log::info!(
                    "add-url: {} not read now, left to the prefetch: {why}",
                    r.target.url
                );
                let provisional = r.entry.object.provisional_oid;
                return (r, Some((provisional, why, again)));
            }
        }
        (r, None)
    }
}
