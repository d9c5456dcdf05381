//! What went wrong resolving a DRS URI or talking to Indexd. Every message
//! names the DRS URI or the URL asked (without query or user-info) and
//! what was asked, never a token, password or signed URL; says what to do
//! next where that is clear (a refused key: which file, and what may be
//! wrong with it); and every error says, through
//! [`DrsError::permanence`], whether asking again unchanged can help, in
//! the same terms as [`RemoteError`]'s.
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
        "{asked}: {server} refused access (HTTP {status}) with {tried}{}{}",
        says(said),
        refusal_advice(tried, *status)
    )]
    Auth {
        asked: String,
        /// The URL asked (or the server's root), without query or user-info.
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
    #[error(
        "{asked}: HTTP {status} from {server}{}{}{}",
        tries(*attempts),
        says(said),
        status_advice(*status, server)
    )]
    Http {
        asked: String,
        /// As [`DrsError::Auth`]'s.
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

/// What to do about a server refusing the credential `tried` with
/// `status`.
fn refusal_advice(tried: &CredentialKind, status: u16) -> String {
    use crate::settings::env::GEN3_CREDENTIALS_ENV;
    match tried {
        CredentialKind::Gen3(path) if status == 401 => format!(
            ". Check the Gen3 API key in {}: it may have expired or been revoked (download a \
             new one from the commons' Profile page, Create API key, into that file), or its \
             user may lack access to this project",
            path.display()
        ),
        CredentialKind::Gen3(path) => format!(
            ". The user of the Gen3 API key in {} may not do this: ask the commons for access \
             to the project (its authz), or check that the key is the one for this commons",
            path.display()
        ),
        CredentialKind::TokenFile(path) => format!(
            ". Check the token in {}: it may have expired, or not grant this",
            path.display()
        ),
        CredentialKind::Netrc { file, host } => {
            format!(". Check the login for {host} in {file}")
        }
        CredentialKind::None => format!(
            ". No credential was sent: for a Gen3 commons, put an API key it issued in the \
             file {GEN3_CREDENTIALS_ENV} names"
        ),
    }
}

/// What to do about an HTTP `status` from `url` (as shown), where it is
/// clear.
fn status_advice(status: u16, url: &str) -> String {
    let path = url::Url::parse(url)
        .map(|u| u.path().to_string())
        .unwrap_or_default();
    let fence_upload = path.ends_with("/user/data/upload")
        || path.contains("/user/data/upload/")
        || path.contains("/user/data/multipart/");
    match status {
        404 if fence_upload => ". Fence found no record under the guid it was given: the \
                                record is missing from the commons' Indexd (Fence uploads only \
                                into a record that exists)"
            .into(),
        500..=599 => ". The server failed: try again later, and if it goes on, tell its operators \
                       (with the error id, when there is one)"
            .into(),
        _ => String::new(),
    }
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

    #[test]
    fn a_refused_gen3_key_says_which_file_and_what_to_do() {
        let refused_with = |tried, status| DrsError::Auth {
            asked: "Fence upload of \"a.bin\"".into(),
            server: "https://commons.example/user/data/upload".into(),
            tried,
            status,
            said: None,
        };
        let key = CredentialKind::Gen3("/home/u/.gen3/credentials.json".into());
        let refused = |status| refused_with(key.clone(), status);
        let expired = refused(401).to_string();
        for part in [
            "https://commons.example/user/data/upload",
            "HTTP 401",
            "the Gen3 API key in /home/u/.gen3/credentials.json",
            "expired",
            "download a new one",
        ] {
            assert!(expired.contains(part), "{part}: {expired}");
        }
        let forbidden = refused(403).to_string();
        assert!(
            forbidden.contains("ask the commons for access"),
            "{forbidden}"
        );
        let none = refused_with(CredentialKind::None, 401);
        assert!(
            none.to_string()
                .contains("put an API key it issued in the file DRSD_GEN3_CREDENTIALS names"),
            "{none}"
        );
    }

    #[test]
    fn a_404_from_a_fence_upload_says_the_record_is_missing_and_names_the_url() {
        let http = |status, server: &str| DrsError::Http {
            asked: "Fence multipart upload of \"a.bin\"".into(),
            server: server.into(),
            status,
            attempts: 1,
            said: Some("\"No indexed document found with id dg.TEST/0a1b\"".into()),
        };
        let text = http(404, "https://commons.example/user/data/multipart/init").to_string();
        for part in [
            "HTTP 404 from https://commons.example/user/data/multipart/init",
            "the server says \"No indexed document found with id dg.TEST/0a1b\"",
            "the record is missing",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        let other = http(404, "https://commons.example/index/index/x").to_string();
        assert!(!other.contains("record is missing"), "{other}");
        let failed = http(502, "https://commons.example/user/data/upload").to_string();
        assert!(failed.contains("try again later"), "{failed}");
    }
}
