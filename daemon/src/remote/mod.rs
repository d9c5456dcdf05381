//! Remote object stores: S3-compatible (Ceph RGW, AWS S3) through presigned
//! requests (rusty-s3 signs, reqwest sends), with the credential chain of the
//! AWS tools; plain HTTPS objects (`http.rs`). Errors name the object and the
//! credential source, never a signed URL or a secret.
//!
//! [`Remote`] (`facade.rs`) is the way in for the rest of the daemon: it
//! owns the clients and chooses one by URL. Below it: `transport.rs` sends
//! and retries, `s3.rs` (and `s3/multipart.rs`) and `http.rs` make the
//! requests, `download.rs` fetches into the pool (resumable, through the
//! partial files `partial.rs` and [`partials`] own), `upload.rs` and
//! `copy.rs` write to an object remote; `dir.rs` is a folder as one, and
//! `object_remote.rs` the enum of the two that [`Remote`] dispatches on. [`drs`] resolves GA4GH DRS URIs
//! and talks to Gen3 Indexd.

mod answer;
mod append;
mod around_pool;
mod checksum;
mod clients;
mod copy;
mod credentials;
pub mod dir;
mod download;
pub mod drs;
mod error;
mod facade;
mod http;
mod journal;
mod object_remote;
mod partial;
pub mod partials;
pub mod parts;
mod proof;
mod resolved;
mod s3;
mod transport;
mod upload;
mod url;
#[cfg(test)]
mod url_props;

pub use checksum::content_sha256;
pub use clients::DRS_WAIT_ENV;
pub use copy::CopyOutcome;
pub use credentials::{CredentialSource, S3Credentials};
pub use download::{
    fetch_into_file, fetch_into_pool, read_small, Fetch, FetchError, FetchOptions, Fetched, Origin,
    SmallBody,
};
pub use error::{Permanence, RemoteError};
pub use facade::{Located, PointerFetchError, Remote};
pub use http::{shown as shown_url, HttpClient, HttpConfig, CA_FILE_ENV, METADATA_TIMEOUT_ENV};
pub use journal::{abort_left_over, LeftOver, MultipartUpload, SentObject, UploadJournal};
pub use object_remote::{Held, ObjectRemote, StoreError};
pub use proof::{presence, trusted, Local, Presence, Proof, TRUST_CLAIMS_ENV};
pub use resolved::{Access, ResolveError};
pub use s3::{CopySource, ObjectMeta, PutOutcome, S3Client, S3Config, SHA256_META};
pub use transport::Retry;
pub use upload::{
    upload_from_file, upload_from_pool, ObjectLayout, UploadError, UploadOptions, Uploaded,
};
pub use url::{redact_text, redacted, without_query, ObjectUrl, SecretUrl, REDACTED};
