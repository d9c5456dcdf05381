//! GA4GH DRS and Gen3 Indexd clients: resolve `drs://` URIs to object
//! metadata (size, checksums) and to the URL their bytes are fetched from,
//! and register pushed objects in Indexd so they get DRS URIs of their own.
//!
//! - `uri.rs`: the two DRS URI forms, the id sent, one canonical text;
//! - `servers.rs`: `DRSD_DRS_SERVERS`, which server a URI goes to;
//! - `model.rs`: what servers answer, and the checksums drsd reads from it;
//! - `client.rs` and `bulk.rs`: objects one at a time or in bulk, access
//!   URLs; `bulk_access.rs`: many access URLs in one request;
//! - `indexd_client.rs`: Indexd records by sha256 and did, and registration;
//! - `call.rs`: the one request path (credentials, retries, 202 waits,
//!   answers bounded and checked); `error_page.rs`: what an HTML error
//!   page (Fence's) says;
//! - `auth.rs`, `netrc.rs`, `gen3.rs`: credentials per server, and why a
//!   server must be named before a token goes to it.
//!
//! A server may lie and a URI may be hostile: every answer is checked
//! against what was asked, ids travel as one encoded path segment, and
//! tokens, passwords and signed URLs never reach a message or `Debug`.

mod auth;
mod bulk;
mod bulk_access;
mod call;
mod client;
mod error;
mod error_page;
mod fence;
mod gen3;
mod indexd_client;
mod model;
mod netrc;
mod servers;
mod uri;

#[cfg(test)]
mod tests;

pub use auth::{CredentialKind, DrsAuth};
pub use bulk_access::{AccessWanted, BulkUrls, ACCESS_BATCH};
pub(crate) use call::Api;
pub use client::{no_access, AccessWay, DrsClient};
pub use error::DrsError;
pub use fence::{
    content_did, CommonsRecord, Completion, Fence, FencePart, MultipartStart, NewUpload, Probe,
    Registration,
};
pub use indexd_client::{IndexdClient, IndexdRecord, NewRecord};
pub use model::{AccessMethod, AccessUrl, AccessUrlJson, Checksum, DrsObject};
pub use netrc::{Login, NetrcFile};
pub use servers::{BadDrsServers, DrsServers};
pub use uri::{BadDrsUri, DrsUri};
