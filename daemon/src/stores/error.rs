//! What went wrong talking to a remote, and whether trying again can help:
//! one classification ([`Permanence`]) that both the request retry loop
//! (`transport::send_retrying`) and the prefetch job's backoff read, so an error
//! that cannot succeed on retry is neither retried five times per request
//! nor forever per job.

use std::error::Error as _;
use std::path::PathBuf;

/// Whether the same request, sent again unchanged, can succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permanence {
    /// A passing condition: 5xx, 429, 408, a timeout, a refused or broken
    /// connection, a name server that did not answer.
    Transient,
    /// The request cannot succeed as sent: any other 4xx (400, 401, 403,
    /// 404, 410, ...), a host name that does not exist, TLS spoken to a
    /// port that does not speak it, a certificate that is not trusted, a
    /// malformed URL, credentials that cannot be read. Someone must change
    /// something first (the URL, the server, the credentials).
    Permanent,
}

/// glibc's and the BSDs' wording for a name that does not exist (EAI_NONAME,
/// EAI_NODATA). A name server that did not answer (EAI_AGAIN, "Temporary
/// failure in name resolution") is not among them: that one passes.
const NO_SUCH_NAME: [&str; 3] = [
    "Name or service not known",
    "nodename nor servname provided",
    "No address associated with hostname",
];

impl Permanence {
    /// The class of an HTTP status that was not a success.
    pub fn of_status(status: u16) -> Permanence {
        match status {
            408 | 429 => Permanence::Transient,
            s if s >= 500 => Permanence::Transient,
            _ => Permanence::Permanent,
        }
    }

    /// The class of a request that got no HTTP answer. reqwest wraps the
    /// cause (hyper, the resolver, rustls) in a chain of sources; the
    /// permanent ones are told apart by what those sources are.
    pub fn of_transport(e: &reqwest::Error) -> Permanence {
        if e.is_builder() || e.is_redirect() {
            return Permanence::Permanent;
        }
        if e.is_timeout() {
            return Permanence::Transient;
        }
        let mut cause = e.source();
        while let Some(err) = cause {
            if err
                .downcast_ref::<std::io::Error>()
                .is_some_and(is_handshake_refusal)
            {
                return Permanence::Permanent;
            }
            let text = err.to_string();
            if NO_SUCH_NAME.iter().any(|m| text.contains(m)) {
                return Permanence::Permanent;
            }
            cause = err.source();
        }
        Permanence::Transient
    }
}

/// Whether the request failed because its host name could not be resolved
/// (it does not exist, or no name server answered).
pub fn is_name_failure(e: &reqwest::Error) -> bool {
    let mut cause = e.source();
    while let Some(err) = cause {
        let text = err.to_string();
        if NO_SUCH_NAME.iter().any(|m| text.contains(m))
            || text.contains("failure in name resolution")
            || text.starts_with("dns error")
        {
            return true;
        }
        cause = err.source();
    }
    false
}

/// rustls reports a handshake that failed (a plain-HTTP answer to a
/// ClientHello, a certificate not trusted or not for this host) as an
/// InvalidData I/O error, a name that cannot be a TLS server name as
/// InvalidInput; reqwest's connector wraps it in an error of kind Other,
/// whose `source()` skips it, hence the walk through `get_ref`.
fn is_handshake_refusal(io: &std::io::Error) -> bool {
    use std::io::ErrorKind::{InvalidData, InvalidInput};
    if matches!(io.kind(), InvalidData | InvalidInput) {
        return true;
    }
    io.get_ref()
        .and_then(|inner| inner.downcast_ref::<std::io::Error>())
        .is_some_and(is_handshake_refusal)
}

/// What went wrong talking to a remote. `object` is always the plain
/// `s3://bucket/key` (or https) form: signed query strings stay out.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("not an object URL: {url:?}: {why}")]
    BadUrl { url: String, why: String },
    #[error("reading credentials from {path}: {why}")]
    Credentials { path: PathBuf, why: String },
    #[error("{op} {object}: access denied (HTTP {status}{code}); credentials from {source_}")]
    Auth {
        op: &'static str,
        object: String,
        status: u16,
        code: String,
        source_: String,
    },
    #[error("{op} {object}: HTTP {status}{code}{tries}")]
    Http {
        op: &'static str,
        object: String,
        status: u16,
        code: String,
        tries: String,
    },
    #[error("{op} {object}: {why} (after {attempts} attempts)")]
    Transport {
        op: &'static str,
        object: String,
        attempts: u32,
        why: String,
        permanence: Permanence,
    },
    /// A metadata request (a HEAD) got no whole answer in time: a server
    /// that trickles its headers must not hold add-url or a push forever.
    #[error(
        "{op} {object}: no complete answer within {:.1} s (the metadata_timeout setting, {}); the server is stalled or too slow, try again later or raise the setting",
        deadline.as_secs_f64(),
        crate::settings::env::METADATA_TIMEOUT_ENV
    )]
    Deadline {
        op: &'static str,
        object: String,
        deadline: std::time::Duration,
    },
    /// A redirect that cannot or must not be followed: a loop, no
    /// `Location`, a scheme other than http(s).
    #[error("{op} {object}: {why}")]
    Redirect {
        op: &'static str,
        object: String,
        why: String,
    },
    #[error("upload {object}: it could not be recorded, so it was aborted: {source}")]
    Unrecorded {
        object: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{op} {object}: {why}")]
    Protocol {
        op: &'static str,
        object: String,
        why: String,
    },
    /// A setting the client is built from does not parse (tools reading
    /// the environment; the daemon checks its settings when it starts).
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
}

impl RemoteError {
    /// Whether trying again, unchanged, can succeed.
    pub fn permanence(&self) -> Permanence {
        match self {
            RemoteError::BadUrl { .. }
            | RemoteError::Credentials { .. }
            | RemoteError::Auth { .. }
            | RemoteError::Redirect { .. }
            | RemoteError::Settings(_) => Permanence::Permanent,
            RemoteError::Http { status, .. } => Permanence::of_status(*status),
            RemoteError::Transport { permanence, .. } => *permanence,
            // A short body, an answer we could not read: the next may do.
            RemoteError::Protocol { .. } => Permanence::Transient,
            // A stalled server may answer later.
            RemoteError::Deadline { .. } => Permanence::Transient,
            // The registry refused the upload's record: a later try may
            // find it writable again.
            RemoteError::Unrecorded { .. } => Permanence::Transient,
        }
    }

    pub fn is_retryable(&self) -> bool {
        self.permanence() == Permanence::Transient
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_that_cannot_change_on_retry_are_permanent() {
        for s in [400, 401, 403, 404, 405, 410, 412, 416, 451] {
            assert_eq!(Permanence::of_status(s), Permanence::Permanent, "{s}");
        }
        for s in [408, 429, 500, 502, 503, 504] {
            assert_eq!(Permanence::of_status(s), Permanence::Transient, "{s}");
        }
    }

    #[test]
    fn each_error_kind_says_whether_a_retry_can_help() {
        let http = |status| RemoteError::Http {
            op: "GET",
            object: "s3://b/k".into(),
            status,
            code: String::new(),
            tries: String::new(),
        };
        assert!(!http(404).is_retryable());
        assert!(!http(400).is_retryable());
        assert!(http(503).is_retryable());
        let auth = RemoteError::Auth {
            op: "GET",
            object: "s3://b/k".into(),
            status: 403,
            code: String::new(),
            source_: "env".into(),
        };
        assert!(!auth.is_retryable());
        let bad = RemoteError::BadUrl {
            url: "x".into(),
            why: "no".into(),
        };
        assert!(!bad.is_retryable());
        let transport = |permanence| RemoteError::Transport {
            op: "GET",
            object: "s3://b/k".into(),
            attempts: 1,
            why: "x".into(),
            permanence,
        };
        assert!(transport(Permanence::Transient).is_retryable());
        assert!(!transport(Permanence::Permanent).is_retryable());
        let protocol = RemoteError::Protocol {
            op: "GET",
            object: "s3://b/k".into(),
            why: "body truncated".into(),
        };
        assert!(protocol.is_retryable());
    }
}
