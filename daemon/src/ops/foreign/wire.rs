//! The service's results in the wire's words: the one place a domain type
//! of this service becomes a reply's.

use super::{Added, Refused, Standing, Waiting};
use drsd_proto::{AddedUrl, FailedUrl, JobState, PathWaiting};

impl From<Standing> for JobState {
    fn from(standing: Standing) -> JobState {
        match standing {
            Standing::Hashed => JobState::Hashed,
            Standing::Job(state) => state.into(),
        }
    }
}

impl From<Added> for AddedUrl {
    fn from(a: Added) -> AddedUrl {
        AddedUrl {
            line: a.line,
            url: a.url,
            path: a.path,
            oid: a.oid,
            size: a.size,
            provisional: a.provisional,
            oid_from: a.oid_from,
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
            state: w.standing.into(),
            error: w.error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::Oid;
    use drsd_proto::OidSource;

    #[test]
    fn results_reach_the_wire_with_their_oid_source_and_state() {
        let added = AddedUrl::from(Added {
            line: 3,
            url: "s3://b/k".into(),
            path: "k".into(),
            oid: Oid::of(b"k"),
            size: 1,
            provisional: true,
            oid_from: OidSource::Etag,
        });
        assert_eq!(added.oid, Oid::of(b"k"));
        assert_eq!(added.oid_from, OidSource::Etag);
        let waiting = PathWaiting::from(Waiting {
            path: "k".into(),
            url: "s3://b/k".into(),
            standing: Standing::Job(crate::registry::JobState::Retrying),
            error: Some("store down".into()),
        });
        assert_eq!(waiting.state, JobState::Retrying);
        let hashed = PathWaiting::from(Waiting {
            path: "k".into(),
            url: "s3://b/k".into(),
            standing: Standing::Hashed,
            error: None,
        });
        assert_eq!(hashed.state, JobState::Hashed);
    }
}
