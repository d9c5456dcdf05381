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
