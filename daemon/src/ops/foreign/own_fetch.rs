//! `team_trust_members = false`: where an object's source gives nothing
//! derived from its content (nginx's ETag is mtime-size, a multipart
//! upload's names its parts), a content oid in the team's registry is only
//! another member's word. Such an object is fetched and hashed here, once,
//! and its pointers promoted to what this node's own hash says
//! ([`Registry::hashed_here`]); the registry's content oid never is.
//!
//! The fetch runs off the promotion path (a download may take hours, and
//! the team's loop must keep publishing roots): it records the node's own
//! hash, and the team's next look for hashed objects (every 2 s) promotes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::ops::workers::prefetch::{failure_reason, prefetch};
use crate::pool::{Oid, Pool};
use crate::registry::{Entry, ForeignObject, Registry};
use crate::remote::{FetchOptions, Remote};

/// An object by its provisional oid and size, as the pointers name it.
type ObjectKey = (Oid, u64);

/// The fetches this node makes of objects it will not take a member's
/// word for: one at a time per object, and a failed one not tried again
/// before `retry` has passed.
pub(crate) struct OwnFetches {
    pool: Arc<Pool>,
    remote: Arc<Remote>,
    registry: Arc<Registry>,
    part_size: Option<u64>,
    retry: Duration,
    /// Running (no time) or failed (tried again after the time).
    busy: Mutex<HashMap<ObjectKey, Option<Instant>>>,
}

impl OwnFetches {
    pub(crate) fn new(
        pool: Arc<Pool>,
        remote: Arc<Remote>,
        registry: Arc<Registry>,
        part_size: Option<u64>,
        retry: Duration,
    ) -> OwnFetches {
        OwnFetches {
            pool,
            remote,
            registry,
            part_size,
            retry,
            busy: Mutex::default(),
        }
    }

    /// Starts a fetch of each entry's object that is not running, nor
    /// failed less than `retry` ago.
    pub(crate) fn start(self: &Arc<Self>, entries: Vec<Entry>) {
        for entry in entries {
            let key = (entry.object.provisional_oid, entry.object.size);
            if !self.take(key) {
                continue;
            }
            log::info!(
                "{}: another node's hash is not taken for this source (team_trust_members = \
                 false): fetching it here",
                entry.object.url
            );
            let this = self.clone();
            tokio::spawn(async move { this.fetch(key, entry.object).await });
        }
    }

    /// Marks `key` running; false when it runs already or failed lately.
    fn take(&self, key: ObjectKey) -> bool {
        let mut busy = crate::lock::lock(&self.busy);
        match busy.get(&key) {
            Some(None) => false,
            Some(Some(again)) if Instant::now() < *again => false,
            _ => {
                busy.insert(key, None);
                true
            }
        }
    }

    /// One fetch of `object`, hashed; the hash recorded as this node's own.
    async fn fetch(&self, key: ObjectKey, object: ForeignObject) {
        // The registry's content oid is the word not taken: not expected.
        let object = ForeignObject {
            content_oid: None,
            content_read: false,
            ..object
        };
        let shown = object.url.to_string();
        let fetched = prefetch(
            self.pool.clone(),
            &self.remote,
            &object,
            FetchOptions::default(),
            self.part_size,
            &|_| {},
        )
        .await;
        let outcome = match fetched {
            Ok(hashed) => {
                let (registry, oid) = (self.registry.clone(), hashed.oid);
                crate::blocking(move || registry.record_hashed_here(&key.0, key.1, &oid))
                    .await
                    .map(|()| oid)
                    .map_err(|e| e.to_string())
            }
            Err(e) => Err(failure_reason(&e, self.pool.dir())),
        };
        let mut busy = crate::lock::lock(&self.busy);
        match outcome {
            Ok(oid) => {
                log::info!("fetched {shown} here: sha256 {oid}");
                busy.remove(&key);
            }
            Err(why) => {
                log::warn!(
                    "fetching {shown} here failed, again in {}s: {why}",
                    self.retry.as_secs()
                );
                busy.insert(key, Some(Instant::now() + self.retry));
            }
        }
    }
}
