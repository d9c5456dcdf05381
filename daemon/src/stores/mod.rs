//! The clients that speak to object stores, and what they share: each asks
//! one store for what it holds and answers with what the store said,
//! checked against what was asked, without deciding what to do with it.
//!
//! - `s3.rs` (and `s3/multipart.rs`): S3-compatible stores (Ceph RGW, AWS
//!   S3) through presigned requests (rusty-s3 signs, reqwest sends), with
//!   the credential chain of the AWS tools (`credentials.rs`) and the
//!   journal of multipart uploads in flight (`journal.rs`, a seam the
//!   daemon's registry implements);
//! - `http.rs`: plain HTTPS objects;
//! - [`dir`]: a folder as an object store (`file:///shared/objects`);
//! - [`drs`]: GA4GH DRS servers and Gen3 Indexd;
//! - `transport.rs`: sending one request with bounded retries, for all of
//!   them; `error.rs`: what went wrong and whether retrying can help;
//! - `url.rs`: object URLs, and keeping the secrets some carry out of every
//!   message; `checksum.rs`: the content sha256 a store states in headers.
//!
//! Errors name the object and the credential source, never a signed URL or
//! a secret. Moving bytes into the pool and out (resumable downloads,
//! uploads, verified copies, proofs that a store holds an object) is
//! [`crate::remote`]'s, which drives these clients.

mod checksum;
mod credentials;
pub mod dir;
pub mod drs;
mod error;
mod http;
mod journal;
mod s3;
mod transport;
mod url;
#[cfg(test)]
mod url_props;

pub use checksum::content_sha256;
pub use credentials::{CredentialSource, S3Credentials};
pub use error::{Permanence, RemoteError};
pub use http::{shown as shown_url, HttpClient, HttpConfig};
pub use journal::{abort_left_over, LeftOver, MultipartUpload, SentObject, UploadJournal};
pub use s3::{
    is_content_etag, CopySource, ObjectMeta, PutOutcome, S3Client, S3Config, SHA256_META,
};
pub use transport::Retry;
pub use url::{redact_text, redacted, without_query, ObjectLayout, ObjectUrl, SecretUrl, REDACTED};
