//! Objects this daemon sent to, or found in, an object remote lately: the
//! pre-push hook's batch checks each object once, and git-lfs then asks the
//! agent for every one again; those are answered from here.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::pool::Oid;
use crate::remote::ObjectRemote;

/// How long an object this daemon sent or found stays known to be there.
const CONFIRMED_FOR: Duration = Duration::from_secs(600);

/// Past this many entries, the expired ones go.
const PRUNE_FROM: usize = 100_000;

/// Objects known to be in an object remote (by its URL), and since when.
#[derive(Default)]
pub(super) struct Confirmed(Mutex<BTreeMap<(String, Oid), Instant>>);

fn place(remote: &ObjectRemote) -> String {
    remote.url()
}

impl Confirmed {
    pub(super) fn holds(&self, layout: &ObjectRemote, oid: Oid) -> bool {
        let map = crate::lock::lock(&self.0);
        map.get(&(place(layout), oid))
            .is_some_and(|at| at.elapsed() < CONFIRMED_FOR)
    }

    pub(super) fn record(&self, layout: &ObjectRemote, oid: Oid) {
        let mut map = crate::lock::lock(&self.0);
        if map.len() >= PRUNE_FROM {
            map.retain(|_, at| at.elapsed() < CONFIRMED_FOR);
        }
        map.insert((place(layout), oid), Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_confirmed_in_the_remote_it_was_recorded_for_only() {
        let confirmed = Confirmed::default();
        let here = ObjectRemote::parse("s3://bkt/a").unwrap();
        let there = ObjectRemote::parse("/srv/bkt/a").unwrap();
        let oid = Oid::of(b"x");
        assert!(!confirmed.holds(&here, oid));
        confirmed.record(&here, oid);
        assert!(confirmed.holds(&here, oid));
        assert!(!confirmed.holds(&there, oid));
    }
}
