//! DRS reads prepared for a batch: when drsd is about to read several
//! `drs://` objects at once (a push reading foreign objects through the
//! pool), their records are read in bulk (`POST /objects`) and their signed
//! URLs asked in one request per server (`POST /objects/access`, where the
//! server offers it), instead of two requests per object.
//!
//! What this holds is a secret (signed URLs) and short-lived, so it is held
//! in memory only, by the batch that asked ([`PreparedBatch`]: dropped, its
//! leftovers go), for [`HOLD`] at most and never past the expiry the URL
//! itself states (`X-Amz-Expires`, `Expires`, ...); each is taken by one
//! read, never handed out twice. A read that finds none, or one past its
//! time, asks its DRS server as it always did (`resolved.rs`); and a
//! prepared URL that fails is followed by that same per-object way.
//! Nothing here is logged, written or shown but counts.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::stores::drs::{AccessUrl, AccessWanted, DrsObject, DrsUri};

use super::Remote;

/// The longest a prepared URL is held.
pub const HOLD: Duration = Duration::from_secs(60);

/// A URL stating its own expiry is held until this long before it: the
/// read must be done by then, not just begun.
const MARGIN: Duration = Duration::from_secs(10);

/// One read prepared: the object's record and a URL to its bytes.
struct Held {
    object: DrsObject,
    access: AccessUrl,
    until: Instant,
    batch: u64,
}

/// The prepared reads of every batch under way, by DRS URI.
#[derive(Default)]
pub(crate) struct PreparedReads {
    held: Mutex<HashMap<String, Held>>,
    next_batch: AtomicU64,
}

/// The reads one batch prepared; they go when it is dropped.
pub struct PreparedBatch {
    reads: Arc<PreparedReads>,
    batch: u64,
    count: usize,
}

impl PreparedBatch {
    /// How many reads were prepared.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn hold(&mut self, uri: &DrsUri, object: DrsObject, access: AccessUrl, until: Instant) {
        let held = Held {
            object,
            access,
            until,
            batch: self.batch,
        };
        crate::lock::lock(&self.reads.held).insert(uri.as_str().to_string(), held);
        self.count += 1;
    }
}

impl Drop for PreparedBatch {
    fn drop(&mut self) {
        let batch = self.batch;
        crate::lock::lock(&self.reads.held).retain(|_, h| h.batch != batch);
    }
}

impl PreparedReads {
    fn batch(self: &Arc<Self>) -> PreparedBatch {
        PreparedBatch {
            reads: self.clone(),
            batch: self.next_batch.fetch_add(1, Ordering::Relaxed),
            count: 0,
        }
    }

    /// The read prepared for `uri`, taken: no other read gets it. None
    /// when there is none or its time is past (then it is dropped too).
    pub(crate) fn take(&self, uri: &DrsUri) -> Option<(DrsObject, AccessUrl)> {
        let now = Instant::now();
        let mut held = crate::lock::lock(&self.held);
        held.retain(|_, h| h.until > now);
        held.remove(uri.as_str()).map(|h| (h.object, h.access))
    }
}

impl Remote {
    /// Prepares the reads of `uris` (see the module notes): what the
    /// returned batch holds, [`Remote::fetch_verified`] takes. Never an
    /// error: what could not be prepared is read the usual way, which
    /// says what is wrong.
    pub async fn prepare_drs_reads(&self, uris: &[DrsUri]) -> PreparedBatch {
        let mut batch = self.prepared.batch();
        let mut distinct: Vec<DrsUri> = uris.to_vec();
        distinct.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        distinct.dedup_by(|a, b| a.as_str() == b.as_str());
        // One read gains nothing from a bulk request.
        if distinct.len() < 2 {
            return batch;
        }
        let Ok(drs) = self.drs() else {
            return batch;
        };
        let started = Instant::now();
        let objects = drs.objects(&distinct).await;
        let mut wanted = Vec::new();
        let mut records = Vec::new();
        for (uri, object) in distinct.iter().zip(objects) {
            let Ok(object) = object else { continue };
            if let Some(access_id) = first_access_id(&drs, uri, &object) {
                wanted.push(AccessWanted {
                    uri: uri.clone(),
                    object_id: object.id.clone(),
                    access_id,
                });
                records.push(object);
            }
        }
        if wanted.is_empty() {
            return batch;
        }
        let asked = wanted.len();
        let mut urls = drs.bulk_access(&wanted).await;
        let now = SystemTime::now();
        for (w, object) in wanted.into_iter().zip(records) {
            let Some(access) = urls.remove(&(w.object_id, w.access_id)) else {
                continue;
            };
            if let Some(until) = held_until(&access, started, now) {
                batch.hold(&w.uri, object, access, until);
            }
        }
        log::info!(
            "{} DRS reads about to be made: {} access URLs asked in bulk, {} got, in {:.3} s",
            distinct.len(),
            asked,
            batch.len(),
            started.elapsed().as_secs_f64()
        );
        batch
    }
}

/// The access id of `object`'s first way when that way is signed: what
/// its read would ask for first. An object read first by a raw URL needs
/// no signing.
fn first_access_id(
    drs: &crate::stores::drs::DrsClient,
    uri: &DrsUri,
    object: &DrsObject,
) -> Option<String> {
    let ways = drs.access_ways(uri, object).ok()?;
    let way = ways.first().filter(|w| w.signed)?;
    let method = object.access_methods.get(way.method)?;
    method.access_id.clone().filter(|id| !id.is_empty())
}

/// Until when a URL asked at `asked` (the clock then read `now`) is held:
/// [`HOLD`] after, and [`MARGIN`] before the expiry it states. None when
/// that is already past.
fn held_until(access: &AccessUrl, asked: Instant, now: SystemTime) -> Option<Instant> {
    let mut hold = HOLD;
    if let Some(expires) = stated_expiry(access.url.expose()) {
        let left = expires.duration_since(now).unwrap_or_default();
        hold = hold.min(left.saturating_sub(MARGIN));
    }
    (!hold.is_zero()).then(|| asked + hold)
}

/// When a signed URL says it expires: SigV4's (and GCS's) `X-Amz-Date` plus
/// `X-Amz-Expires`, or an `Expires` in seconds since the epoch (SigV2,
/// CloudFront, many signers). None when it says nothing drsd reads.
fn stated_expiry(url: &str) -> Option<SystemTime> {
    let parsed = url::Url::parse(url).ok()?;
    let mut date = None;
    let mut lifetime = None;
    let mut epoch = None;
    for (key, value) in parsed.query_pairs() {
        match key.to_ascii_lowercase().as_str() {
            "x-amz-date" | "x-goog-date" => date = amz_date(&value),
            "x-amz-expires" | "x-goog-expires" => lifetime = value.parse::<u64>().ok(),
            "expires" => epoch = value.parse::<u64>().ok(),
            _ => {}
        }
    }
    match (date, lifetime, epoch) {
        (Some(date), Some(secs), _) => date.checked_add(Duration::from_secs(secs)),
        (_, _, Some(secs)) => UNIX_EPOCH.checked_add(Duration::from_secs(secs)),
        _ => None,
    }
}

/// `20240131T235959Z` as a time.
fn amz_date(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<u64>().ok();
    let (y, m, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (hh, mm, ss) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let days = days_from_civil(y, m, d)?;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// Days from 1970-01-01 to the date (proleptic Gregorian, 1970 on).
fn days_from_civil(y: u64, m: u64, d: u64) -> Option<u64> {
    let (y, m) = if m <= 2 {
        (y.checked_sub(1)?, m + 9)
    } else {
        (y, m - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).checked_sub(719_468)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::SecretUrl;

    fn access(url: &str) -> AccessUrl {
        AccessUrl {
            url: SecretUrl::new(url),
            headers: Vec::new(),
        }
    }

    fn object(id: &str) -> DrsObject {
        DrsObject {
            id: id.into(),
            self_uri: None,
            size: 1,
            checksums: vec![],
            access_methods: vec![],
            name: None,
        }
    }

    #[test]
    fn an_amz_date_is_read_as_utc() {
        let t = amz_date("20240131T235959Z").unwrap();
        assert_eq!(
            t.duration_since(UNIX_EPOCH).unwrap().as_secs(),
            1_706_745_599
        );
        assert!(amz_date("2024-01-31").is_none());
        assert!(amz_date("20241331T000000Z").is_none());
    }

    #[test]
    fn a_url_is_held_a_minute_at_most_and_never_past_what_it_states() {
        let now = SystemTime::now();
        let asked = Instant::now();
        let epoch = now.duration_since(UNIX_EPOCH).unwrap().as_secs();
        let plain = held_until(&access("https://h/x"), asked, now).unwrap();
        assert_eq!(plain, asked + HOLD);
        let soon = format!("https://h/x?expires={}&sig=s", epoch + 30);
        let until = held_until(&access(&soon), asked, now).unwrap();
        assert!(until <= asked + Duration::from_secs(20), "{until:?}");
        let gone = format!("https://h/x?Expires={}", epoch + 3);
        assert!(held_until(&access(&gone), asked, now).is_none());
        let sigv4 =
            "https://b.s3/k?X-Amz-Date=20200101T000000Z&X-Amz-Expires=3600&X-Amz-Signature=s";
        assert!(
            held_until(&access(sigv4), asked, now).is_none(),
            "expired in 2020"
        );
    }

    #[test]
    fn a_prepared_read_is_taken_once_and_goes_with_its_batch() {
        let reads = Arc::new(PreparedReads::default());
        let (a, b) = (
            DrsUri::parse("drs://h/a").unwrap(),
            DrsUri::parse("drs://h/b").unwrap(),
        );
        let mut batch = reads.batch();
        let later = Instant::now() + HOLD;
        batch.hold(&a, object("a"), access("https://h/a?sig=1"), later);
        batch.hold(&b, object("b"), access("https://h/b?sig=2"), later);
        assert_eq!(batch.len(), 2);
        let (got, url) = reads.take(&a).unwrap();
        assert_eq!(
            (got.id.as_str(), url.url.expose()),
            ("a", "https://h/a?sig=1")
        );
        assert!(reads.take(&a).is_none(), "used once");
        drop(batch);
        assert!(reads.take(&b).is_none(), "gone with its batch");
    }

    #[test]
    fn a_prepared_read_past_its_time_is_not_handed_out() {
        let reads = Arc::new(PreparedReads::default());
        let a = DrsUri::parse("drs://h/a").unwrap();
        let mut batch = reads.batch();
        batch.hold(&a, object("a"), access("https://h/a"), Instant::now());
        assert!(reads.take(&a).is_none());
    }
}
