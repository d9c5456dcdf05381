//! Moving verified bytes between the object stores and the pool, behind
//! one [`Remote`] facade (`facade.rs`), the way in for the rest of the
//! daemon: it owns the store clients (`clients.rs`, built from
//! [`crate::stores`]) and chooses one by URL.
//!
//! Into the pool: `download.rs` fetches resumably in parallel ranges, each
//! answer checked against its request (`answer.rs`) before a byte is
//! appended (`append.rs`) to a partial file whose record says what was
//! checked (`partial.rs`); [`partials`] names those files and removes the
//! ones no download will resume, given the names their owners hold;
//! `resolved.rs` reads an object wherever its URL says (DRS through its
//! access URL); `around_pool.rs` fetches past a full pool. Out of it:
//! `upload.rs` and `copy.rs` write to an object remote,
//! [`fence_upload`] into a Gen3 commons through Fence's signed URLs (its
//! parts hashed beside their upload by [`digest`], which also holds the
//! one reader of a blob's parts and the one md5 of a blob), `proof.rs` shows
//! (never takes on a claim) that a store holds an object, with the part
//! sizes of [`parts`]; `object_remote.rs` is the repo's object remote (an
//! S3 prefix or a folder) that [`Remote`] dispatches on.
//!
//! Nothing here speaks HTTP itself or reads the registry: requests are
//! [`crate::stores`]'s, and what the daemon records comes in through
//! narrow seams (`stores::UploadJournal`, [`partials::Owner`]).

mod answer;
mod append;
mod around_pool;
mod clients;
mod copy;
pub mod digest;
mod download;
mod facade;
pub mod fence_upload;
mod gen3;
mod object_remote;
mod partial;
pub mod partials;
pub mod parts;
mod prepared;
mod proof;
mod resolved;
mod upload;

pub use copy::CopyOutcome;
pub use download::{
    fetch_into_file, fetch_into_pool, read_small, Fetch, FetchError, FetchOptions, Fetched, Origin,
    SmallBody,
};
pub use facade::{Located, PointerFetchError, Remote};
pub use gen3::{project_of, BadCommons, CommonsError, Gen3Commons, GEN3_SCHEME};
pub use object_remote::{Held, ObjectRemote, StoreError, UnusableRemote};
pub use prepared::PreparedBatch;
pub use proof::{presence, trusted, Local, Presence, Proof};
pub use resolved::{Access, ResolveError};
pub use upload::{upload_from_file, upload_from_pool, UploadError, UploadOptions, Uploaded};
