//! The registry of foreign objects: remote objects added by URL, never
//! uploaded by us. Per object its location, ETag, size, provisional oid
//! (`sha256` of the ETag), and its content oid once known; per repo which
//! paths point at which object.
//!
//! Kept by an engine ([`engine`]: the traits every engine implements and
//! the design note; SQLite in the daemon's state folder, `registry.sqlite`,
//! WAL, by default) and mirrored per repo into `<git common dir>/lfs/foreign/registry.jsonl`
//! ([`mirror`]), so a repo stays self-describing when the daemon's state is
//! lost: registering the repo again restores what the file lists.
//!
//! Crash safety: a change is one transaction of the engine, committed before the
//! mirror is rewritten (temp file, fsync, rename). A kill between the two
//! leaves the mirror one change behind, and the next rewrite of that repo
//! (any add-url there) catches it up; a restore only inserts what is missing,
//! so running it twice, or after a partial run, changes nothing more.

pub mod engine;
mod front;
mod gen3;
mod job_state;
pub mod mirror;
mod oid_text;
pub mod postgres;
mod queue;
mod schema;
mod sent;
mod sqlite;
mod uploads;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::pool::Oid;
use crate::stores::{is_content_etag, SecretUrl};
use crate::IoError;

pub use engine::{
    ForeignObjects, IndexdRecords, JobQueue, OpenUploads, PgRegistry, RegistryEngine, SentRecords,
    SqliteRegistry, TeamView,
};
pub use front::Registry;
pub use gen3::{FencePart, FenceStep, FenceUpload, FenceUploads, IndexdRegistration};
pub use job_state::JobState;
pub use queue::{Job, JobCounts, JobLine, OpenJob};

/// A job's object as the owner of its partial download: the narrow view
/// `remote::partials` names the file by.
impl<'a> From<&'a ForeignObject> for crate::remote::partials::Owner<'a> {
    fn from(object: &'a ForeignObject) -> crate::remote::partials::Owner<'a> {
        crate::remote::partials::Owner {
            url: object.url.expose(),
            etag: &object.etag,
            size: object.size,
        }
    }
}

/// Where a foreign object lives and what it was when recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignObject {
    /// The URL as given (`s3://bucket/key` or `https://...`). A signed URL is
    /// kept whole (it is needed to fetch the object): the registry and its
    /// mirrors are private files (mode 0600) in private folders (0700), and
    /// it formats only redacted.
    pub url: SecretUrl,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    /// Without quotes; empty when the store sent none (the object was then
    /// added by a checksum or `--sha256`).
    pub etag: String,
    pub size: u64,
    /// [`provisional_oid`] of the URL and ETag; the content oid when the
    /// store sent no ETag (the object was added by its checksum).
    #[serde(with = "oid_text::hex")]
    pub provisional_oid: Oid,
    /// `sha256(content)`, once known.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "oid_text::optional_hex"
    )]
    pub content_oid: Option<Oid>,
    /// The GA4GH DRS id, once the object is registered with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drs_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// Seconds since the Unix epoch when first recorded.
    pub recorded_at: u64,
    /// `md5(content)`, hex, once the prefetch has read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// `content_oid` was learnt from bytes read and hashed here, not from a
    /// claim (a checksum header, `--sha256`, a DRS record). Never written to
    /// or read from a mirror: a mirror is a file in the repo, and a claim.
    #[serde(skip)]
    pub content_read: bool,
}

/// One path of a repo pointing at a foreign object: a line of the mirror.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Relative to the repo's top, `/`-separated.
    pub path: String,
    /// The oid written in the pointer at `path`: content or provisional.
    #[serde(with = "oid_text::hex")]
    pub oid: Oid,
    #[serde(flatten)]
    pub object: ForeignObject,
}

impl Entry {
    /// Whether the pointer at `path` still names its object by something
    /// else than its content (the provisional oid from the ETag, or nothing
    /// is hashed yet): the one test of "is this provisional?".
    pub fn is_provisional(&self) -> bool {
        self.object.content_oid != Some(self.oid)
    }
}

/// The provisional oid of the object at `url` with this (strong) ETag.
///
/// `sha256` of the ETag without its quotes when the ETag is derived from the
/// content: an S3-style MD5 (32 hex digits, `-N` after a multipart upload),
/// so the same bytes share one provisional oid wherever they are. Any other
/// ETag is scoped by the URL (without its query): `sha256("URL\nETAG")`.
/// Measured: nginx's ETag is hex(mtime)-hex(size), so two different files
/// written in the same second with the same size have the same ETag, and
/// `sha256(etag)` alone would give their pointers one oid for two contents.
pub fn provisional_oid(url: &str, etag: &str) -> Oid {
    let etag = etag.trim_matches('"');
    if is_content_etag(etag) {
        return Oid::from_digest(Sha256::digest(etag.as_bytes()).into());
    }
    let plain = crate::stores::without_query(url);
    Oid::from_digest(Sha256::digest(format!("{plain}\n{etag}").as_bytes()).into())
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("registry {path}: {op}: {source}")]
    Sqlite {
        op: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// A team registry's call; names the operation and the server (never
    /// its password).
    #[error("team registry: {0}")]
    Team(#[from] crate::pool::PoolError),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(
        "registry {path}: schema version {found}, this drsd reads {wanted}: start the daemon \
         once without team_db to upgrade it"
    )]
    OldSchema {
        path: std::path::PathBuf,
        found: usize,
        wanted: usize,
    },
    #[error("{path} line {line}: {why}")]
    BadMirror {
        path: std::path::PathBuf,
        line: usize,
        why: String,
    },
}

impl RegistryError {
    /// Whether this is a team registry's database out of reach: a later
    /// call may succeed.
    pub fn unreachable(&self) -> bool {
        matches!(self, RegistryError::Team(e) if e.unreachable())
    }
}

#[cfg(test)]
pub(crate) mod tests;
