//! What went wrong resolving a DRS URI or talking to Indexd. Every message
//! names the DRS URI or the server (its URL without query or user-info)
//! and what was asked, never a token, password or signed URL; and every
//! error says, through [`DrsError::permanence`], whether asking again
//! unchanged can help, in the same terms as [`RemoteError`]'s.
//!
//! The enum is `Clone`: a bulk lookup hands one answer to every copy of a
//! URI given twice.
//!
//! [`RemoteError`]: crate::stores::RemoteError

use std::path::PathBuf;
use std::time::Duration;

use super::auth::CredentialKind;
use super::servers::BadDrsServers;
use super::uri::BadDrsUri;
use crate::stores::Permanence;

#[derive(Debug, Clone, thiserror::Error)]
pub enum DrsError {
    #[error(transparent)]
    BadUri(#[from] BadDrsUri),
    #[error(transparent)]
    BadServers(#[from] BadDrsServers),
    #[error("{uri}: no such object on {server}")]
    NotFound { uri: String, server: String },
    #[error(
        "{asked}: {server} refused access (HTTP {status}) with {tried}{}",
        says(said)
    )]
    Auth {
        asked: String,
        server: String,
        tried: CredentialKind,
        status: u16,
        /// The message of the server's error body, quoted, secrets taken out.
        said: Option<String>,
    },
    #[error(
        "{uri}: the server still answers 202 (not ready) after {:.1} s of waiting; try again later",
        waited.as_secs_f64()
    )]
    StillPending { uri: String, waited: Duration },
    #[error("{asked}: the answer of {server} does not fit the request: {why}")]
    BadAnswer {
        asked: String,
        server: String,
        why: String,
    },
    #[error("{object}: none of its checksums is a sha-256, md5 or etag (it has: {types})")]
    UnknownChecksum { object: String, types: String },
    #[error("{object}: {why}")]
    BadChecksum { object: String, why: String },
    #[error("{uri}: no access method drsd can use (https, http or s3); it offers: {offered}")]
    NoAccess { uri: String, offered: String },
    #[error("{asked}: HTTP {status} from {server}{}{}", tries(*attempts), says(said))]
    Http {
        asked: String,
        server: String,
        status: u16,
        attempts: u32,
        /// As [`DrsError::Auth`]'s.
        said: Option<String>,
    },
    /// The server has the object but its record cannot be used: a blank
    /// Indexd record (an upload begun and not finished), or one drsd cannot
    /// read; the other objects of its batch go on.
    #[error("{uri}: the record {server} holds cannot be used: {why}")]
    Unusable {
        uri: String,
        server: String,
        why: String,
    },
    /// A call got no whole answer within the `metadata_timeout` setting.
    #[error(
        "{asked}: {server} sent no complete answer within {:.1} s (the metadata_timeout setting, {}); the server is stalled or too slow: try again later, or raise the setting",
        deadline.as_secs_f64(),
        crate::settings::env::METADATA_TIMEOUT_ENV
    )]
    Deadline {
        asked: String,
        server: String,
        deadline: Duration,
    },
    #[error("{asked}: {server}: {why}{}", tries(*attempts))]
    Transport {
        asked: String,
        server: String,
        /// The cause, with any URL in it redacted.
        why: String,
        attempts: u32,
        permanence: Permanence,
    },
    #[error("reading {what} {}: {why}", path.display())]
    Credentials {
        what: &'static str,
        path: PathBuf,
        why: String,
    },
}

/// `: the server says "..."`, when it said something.
fn says(said: &Option<String>) -> String {
    said.as_ref()
        .map(|s| format!(": the server says {s}"))
        .unwrap_or_default()
}

fn tries(attempts: u32) -> String {
    match attempts {
        0 | 1 => String::new(),
        n => format!(" (after {n} attempts)"),
    }
}

impl DrsError {
    /// Whether asking again, unchanged, can succeed.
    pub fn permanence(&self) -> Permanence {
        match self {
            DrsError::Http { status, .. } => Permanence::of_status(*status),
            DrsError::Transport { permanence, .. } => *permanence,
            // A server still staging the object, an answer cut or garbled
            // on the way: a later try may do.
            DrsError::StillPending { .. } | DrsError::BadAnswer { .. } => Permanence::Transient,
            // A stalled server may answer a later try.
            DrsError::Deadline { .. } => Permanence::Transient,
            // A token file being rewritten reads empty for a moment.
            DrsError::Credentials { .. } => Permanence::Transient,
            DrsError::BadUri(_)
            | DrsError::BadServers(_)
            | DrsError::NotFound { .. }
            | DrsError::Auth { .. }
            | DrsError::UnknownChecksum { .. }
            | DrsError::BadChecksum { .. }
            | DrsError::NoAccess { .. }
            | DrsError::Unusable { .. } => Permanence::Permanent,
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
    fn each_error_says_whether_a_retry_can_help() {
        let http = |status| DrsError::Http {
            asked: "object drs://h/x".into(),
            server: "https://h/ga4gh/drs/v1".into(),
            status,
            attempts: 1,
            said: None,
        };
        assert!(http(503).is_retryable());
        assert!(!http(400).is_retryable());
        let not_found = DrsError::NotFound {
            uri: "drs://h/x".into(),
            server: "https://h/ga4gh/drs/v1".into(),
        };
        assert!(!not_found.is_retryable());
        let pending = DrsError::StillPending {
            uri: "drs://h/x".into(),
            waited: Duration::from_secs(60),
        };
        assert!(pending.is_retryable());
        assert!(pending.to_string().contains("60.0 s"), "{pending}");
    }

    #[test]
    fn an_auth_error_names_the_server_and_the_credential_tried() {
        let err = DrsError::Auth {
            asked: "object drs://dg.TEST:u1".into(),
            server: "https://data.example.org/ga4gh/drs/v1".into(),
            tried: CredentialKind::TokenFile("/home/u/.drs-token".into()),
            status: 401,
            said: None,
        };
        let text = err.to_string();
        for part in [
            "drs://dg.TEST:u1",
            "https://data.example.org/ga4gh/drs/v1",
            "the bearer token in /home/u/.drs-token",
            "HTTP 401",
        ] {
            assert!(text.contains(part), "{text}");
        }
        assert!(!err.is_retryable());
    }
}
