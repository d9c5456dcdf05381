//! Remote object stores: S3-compatible (Ceph RGW, AWS S3) through presigned
//! requests (rusty-s3 signs, reqwest sends), with the credential chain of the
//! AWS tools; plain HTTPS objects (`http.rs`). Errors name the object and the
//! credential source, never a signed URL or a secret.

mod append;
mod checksum;
mod clients;
mod credentials;
mod download;
mod error;
mod http;
mod s3;
mod upload;
mod url;
#[cfg(test)]
mod url_props;

pub use checksum::content_sha256;
pub use clients::{shared_http, shared_s3};
pub use credentials::{CredentialSource, S3Credentials};
pub use download::{fetch_into_pool, Fetch, FetchError, FetchOptions, Fetched, Origin};
pub use error::RemoteError;
pub use http::{shown as shown_url, HttpClient, HttpConfig, CA_FILE_ENV};
pub use s3::{CopySource, ObjectMeta, PutOutcome, Retry, S3Client, S3Config, SHA256_META};
pub use upload::{upload_from_pool, ObjectLayout, UploadError, UploadOptions, Uploaded};
pub use url::ObjectUrl;
