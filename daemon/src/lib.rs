//! drsd: a per-user daemon that keeps remote genomics objects in Git LFS repos
//! without hashing them at `git add`, and one content-addressed pool shared by
//! every repo on the machine.
//!
//! One folder per concern, each with a small public face:
//! - [`pool`]: the two-tier content-addressed store (kv for small blobs, large
//!   files for the rest), dispatched by length.
//! - [`stores`]: the clients that speak to object stores (S3-compatible
//!   like Ceph RGW, HTTPS, a folder, GA4GH DRS and Gen3 Indexd), object
//!   URLs, and what went wrong asking them.
//! - [`remote`]: moving verified bytes between those stores and the pool
//!   (resumable downloads, uploads, verified copies, proofs of what a store
//!   holds) behind one `Remote` facade.
//! - `drsd_proto` (its own crate): the wire protocol, socket location and
//!   client, all that `drsctl` and the hooks use; the daemon converts its
//!   types to the wire's at its edges.
//! - [`server`]: the daemon itself (socket, connections, thin request
//!   handlers, the one mapping of errors to the wire); [`run`] is its entry
//!   point.
//! - [`ops`]: the service layer below the handlers: transfers, foreign
//!   objects, the repo book and registration, gc, the prefetch workers.
//! - [`watch`]: notify-based watching of registered repos.
//! - [`git`]: running git, and finding a repo's work tree and git folders.
//! - [`lfs`]: the LFS pointer format, scanning repos for pointers, hydration
//!   and promotion.
//! - [`registry`]: foreign objects (added by URL) and the repos using them.
//! - [`private`]: files and folders only their owner may read.
//! - [`settings`]: every setting (flags, environment, the settings file)
//!   and where it came from, built once at start and passed down.
//! - [`safe_write`]: every file written in a repo, created exclusively and
//!   renamed over, never through a symlink.
//! - [`trusted_file`]: every file a setting names that changes what drsd
//!   trusts or sends, opened only when no other user could have written it.

pub mod blocking;
pub mod config;
pub mod failpoint;
pub mod git;
pub mod io_error;
pub mod lfs;
pub(crate) mod lock;
pub mod logging;
pub mod ops;
pub mod pg;
pub mod pool;
pub mod private;
pub mod registry;
pub mod remote;
pub mod safe_write;
pub mod server;
pub mod settings;
pub mod stores;
pub mod trusted_file;
pub mod watch;

#[cfg(test)]
mod props;

pub use blocking::blocking;
pub use config::Config;
pub use io_error::IoError;

/// The largest object size drsd handles: SQLite stores sizes as signed
/// 64-bit integers, and git-lfs reads a pointer's size as one. A size past
/// it (a lying `Content-Length`, a planted mirror line) is refused where it
/// is read, by name.
pub const MAX_OBJECT_SIZE: u64 = i64::MAX as u64;
pub use server::{run, Daemon, DaemonError};
