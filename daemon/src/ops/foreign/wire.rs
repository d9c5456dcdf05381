//! The service's results in the wire's words: the one place a domain type
//! of this service becomes a reply's (oids as hex, states as their names).

use super::{Added, Refused, Waiting};
use crate::ipc::{AddedUrl, FailedUrl, PathWaiting};

impl From<Added> for AddedUrl {
    fn from(a: Added) -> AddedUrl {
        AddedUrl {
            line: a.line,
            url: a.url,
            path: a.path,
            oid: a.oid.to_hex(),
            size: a.size,
            provisional: a.provisional,
            oid_from: a.oid_from.as_str().to_string(),
        }
    }
}

impl From<Refused> for FailedUrl {
    fn from(r: Refused) -> FailedUrl {
        FailedUrl {
            line: r.line,
            url: r.url,
            message: r.message,
        }
    }
}

impl From<Waiting> for PathWaiting {
    fn from(w: Waiting) -> PathWaiting {
        PathWaiting {
            path: w.path,
            url: w.url,
            state: w.standing.as_str().to_string(),
            error: w.error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::foreign::{OidFrom, Standing};
    use crate::pool::Oid;
    use crate::registry::JobState;

    #[test]
    fn results_reach_the_wire_with_oids_in_hex_and_states_by_name() {
        let added = AddedUrl::from(Added {
            line: 3,
            url: "s3://b/k".into(),
            path: "k".into(),
            oid: Oid::of(b"k"),
            size: 1,
            provisional: true,
            oid_from: OidFrom::Etag,
        });
        assert_eq!(added.oid, Oid::of(b"k").to_hex());
        assert_eq!(added.oid_from, "etag");
        let waiting = PathWaiting::from(Waiting {
            path: "k".into(),
            url: "s3://b/k".into(),
            standing: Standing::Job(JobState::Retrying),
            error: Some("store down".into()),
        });
        assert_eq!(waiting.state, "retrying");
    }
}
