//! One download per object at a time in a daemon (the only writer of its
//! pool's partial files): a second request for the object (another repo's
//! pull) waits for the first, then finds the object in the pool.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::pool::Oid;

/// Downloads in flight, by object; an entry goes when its last holder does.
#[derive(Default)]
pub(super) struct Gates(Mutex<BTreeMap<Oid, Weak<AsyncMutex<()>>>>);

impl Gates {
    /// Waits for the turn to download `oid`; it lasts as long as the guard.
    pub(super) async fn turn(&self, oid: Oid) -> OwnedMutexGuard<()> {
        self.gate(oid).lock_owned().await
    }

    fn gate(&self, oid: Oid) -> Arc<AsyncMutex<()>> {
        let mut map = crate::lock::lock(&self.0);
        map.retain(|_, weak| weak.strong_count() > 0);
        if let Some(gate) = map.get(&oid).and_then(Weak::upgrade) {
            return gate;
        }
        let gate = Arc::new(AsyncMutex::new(()));
        map.insert(oid, Arc::downgrade(&gate));
        gate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_download_of_an_object_waits_for_the_first_and_others_do_not() {
        let gates = Gates::default();
        let (a, b) = (Oid::of(b"a"), Oid::of(b"b"));
        let first = gates.turn(a).await;
        let _other = gates.turn(b).await;
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), gates.turn(a));
        assert!(
            waiting.await.is_err(),
            "the second turn came while the first was held"
        );
        drop(first);
        let _second = gates.turn(a).await;
    }
}
