//! Remote object stores: S3-compatible (Ceph RGW, AWS S3) through presigned
//! requests (rusty-s3 signs, reqwest sends), with the credential chain of the
//! AWS tools; plain HTTPS objects (`http.rs`). Errors name the object and the
//! credential source, never a signed URL or a secret.

mod answer;
mod append;
mod checksum;
mod clients;
mod credentials;
mod download;
mod error;
mod http;
mod journal;
mod partial;
pub mod partials;
mod s3;
mod upload;
mod url;
#[cfg(test)]
mod url_props;

pub use checksum::content_sha256;
pub use clients::{record_uploads_in, shared_http, shared_s3};
pub use credentials::{CredentialSource, S3Credentials};
pub use download::{fetch_into_pool, Fetch, FetchError, FetchOptions, Fetched, Origin};
pub use error::{Permanence, RemoteError};
pub use http::{shown as shown_url, HttpClient, HttpConfig, CA_FILE_ENV};
pub use journal::{abort_left_over, LeftOver, MultipartUpload, UploadJournal};
pub use s3::{CopySource, ObjectMeta, PutOutcome, Retry, S3Client, S3Config, SHA256_META};
pub use upload::{
    holds, upload_from_file, upload_from_pool, ObjectLayout, UploadError, UploadOptions, Uploaded,
};
pub use url::{redact_text, redacted, ObjectUrl, SecretUrl, REDACTED};
