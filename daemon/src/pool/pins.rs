//! Pins: the keys a sweep must leave alone right now, because a put is
//! storing them or a batch has stored them and its caller has not yet
//! recorded them. A sweep decides from the repos' pointers; a put in flight
//! is not in any repo yet, so without pins gc could delete what a fetch
//! has just stored. In memory only: pins live as long as the put or batch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::Oid;
use crate::lock::lock;

/// Keys that a sweep must not delete: held by puts in flight and by batches
/// until their caller has recorded what it stored.
#[derive(Clone, Default)]
pub(crate) struct Pins(Arc<Mutex<HashMap<Oid, usize>>>);

impl Pins {
    pub(crate) fn pin(&self, oid: Oid) -> Pin {
        *lock(&self.0).entry(oid).or_insert(0) += 1;
        Pin {
            pins: self.clone(),
            oid,
        }
    }

    /// Held by a sweep across each check-then-delete, so a put cannot pin a
    /// key between the check and the delete.
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<Oid, usize>> {
        lock(&self.0)
    }
}

/// Keeps one key out of every sweep while it lives.
pub struct Pin {
    pins: Pins,
    oid: Oid,
}

impl Pin {
    pub fn oid(&self) -> Oid {
        self.oid
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        let mut map = lock(&self.pins.0);
        if let Some(n) = map.get_mut(&self.oid) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.oid);
            }
        }
    }
}
