//! Pins: the keys a sweep must leave alone right now, because a put is
//! storing them or a batch has stored them and its caller has not yet
//! recorded them. A sweep decides from the repos' pointers; a put in flight
//! is not in any repo yet, so without pins gc could delete what a fetch
//! has just stored.
//!
//! Kept by a [`PinTable`], the pins' engine: [`MemPins`] in memory (pins
//! live as long as the put or batch, and a sweep runs in the same daemon);
//! [`super::PgPins`] (`pg_pins.rs`) is the table a lab's daemons share
//! (issue 31: one pool for a lab's machines), under leases, and passes the
//! same contract (`registry/tests.rs`, where the registry's engines are
//! held to theirs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::error::Result;
use super::Oid;
use crate::lock::lock;

/// Where pins are kept. Pins count: a key pinned twice stays pinned until
/// both are released.
///
/// Atomicity: [`PinTable::unless_pinned`] is the one check-then-act of a
/// sweep. While it runs `then` for a key, no pin of that key can begin (a
/// `pin` of it waits or is ordered after), so a put that pinned its key
/// first never loses it to a concurrent sweep. A shared table does this
/// with a lock on the key's row (or an advisory lock) held across `then`.
pub trait PinTable: Send + Sync + 'static {
    /// Pins `oid` once more. Fails only when the table cannot be reached:
    /// the put must then not go on unpinned.
    fn pin(&self, oid: Oid) -> Result<()>;
    /// Releases one pin of `oid`. Infallible (it runs when a put ends,
    /// error or not): a shared table that cannot be reached lets the pin
    /// lapse with its lease.
    fn unpin(&self, oid: Oid);
    /// Runs `then` (a sweep's delete of `oid`) unless `oid` is pinned, with
    /// new pins of `oid` held off until it returns. True when `then` ran.
    fn unless_pinned(&self, oid: Oid, then: &mut dyn FnMut() -> Result<()>) -> Result<bool>;
    /// [`PinTable::unless_pinned`] for a sweep's batch: runs `then` on
    /// those of `oids` not pinned, with new pins of them held off until it
    /// returns (a shared table: one transaction, not one per key). For each
    /// oid, true when `then` was given it. By default, one key at a time.
    fn unless_pinned_many(
        &self,
        oids: &[Oid],
        then: &mut dyn FnMut(&[Oid]) -> Result<()>,
    ) -> Result<Vec<bool>> {
        oids.iter()
            .map(|&oid| self.unless_pinned(oid, &mut || then(&[oid])))
            .collect()
    }
}

/// The pins of one daemon, in memory.
#[derive(Default)]
pub struct MemPins(Mutex<HashMap<Oid, usize>>);

impl PinTable for MemPins {
    fn pin(&self, oid: Oid) -> Result<()> {
        *lock(&self.0).entry(oid).or_insert(0) += 1;
        Ok(())
    }

    fn unpin(&self, oid: Oid) {
        let mut map = lock(&self.0);
        if let Some(n) = map.get_mut(&oid) {
            *n -= 1;
            if *n == 0 {
                map.remove(&oid);
            }
        }
    }

    fn unless_pinned(&self, oid: Oid, then: &mut dyn FnMut() -> Result<()>) -> Result<bool> {
        // Held across `then`, so a put cannot pin the key between the check
        // and the delete.
        let map = lock(&self.0);
        if map.contains_key(&oid) {
            return Ok(false);
        }
        then()?;
        drop(map);
        Ok(true)
    }

    fn unless_pinned_many(
        &self,
        oids: &[Oid],
        then: &mut dyn FnMut(&[Oid]) -> Result<()>,
    ) -> Result<Vec<bool>> {
        let map = lock(&self.0);
        let free: Vec<bool> = oids.iter().map(|o| !map.contains_key(o)).collect();
        let unpinned: Vec<Oid> = oids
            .iter()
            .zip(&free)
            .filter(|(_, f)| **f)
            .map(|(o, _)| *o)
            .collect();
        then(&unpinned)?;
        drop(map);
        Ok(free)
    }
}

/// Keeps one key out of every sweep while it lives.
pub struct Pin {
    pins: Arc<dyn PinTable>,
    oid: Oid,
}

impl Pin {
    /// Pins `oid` in `pins` until the returned guard drops.
    pub(crate) fn new(pins: &Arc<dyn PinTable>, oid: Oid) -> Result<Pin> {
        pins.pin(oid)?;
        Ok(Pin {
            pins: Arc::clone(pins),
            oid,
        })
    }

    pub fn oid(&self) -> Oid {
        self.oid
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        self.pins.unpin(self.oid);
    }
}
