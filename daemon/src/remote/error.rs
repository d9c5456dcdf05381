use std::path::PathBuf;

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
}
