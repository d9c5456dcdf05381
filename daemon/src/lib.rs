//! drsd: a per-user daemon that keeps remote genomics objects in Git LFS repos
//! without hashing them at `git add`, and one content-addressed pool shared by
//! every repo on the machine.
//!
//! One folder per concern, each with a small public face:
//! - [`pool`]: the two-tier content-addressed store (kv for small blobs, large
//!   files for the rest), dispatched by length.
//! - [`remote`]: S3-compatible stores (Ceph RGW) and object URLs.
//! - [`ipc`]: the wire protocol, socket location and client (all that
//!   `drsctl` and the hooks use).
//! - [`server`]: the daemon itself; [`run`] is its entry point.
//! - [`watch`]: notify-based watching of registered repos.
//! - [`lfs`]: the LFS pointer format, scanning repos for pointers, hydration
//!   and promotion.
//! - [`jobs`]: what a background worker does: prefetch and hash.
//! - [`registry`]: foreign objects (added by URL) and the repos using them.
//! - [`safe_write`]: every file written in a repo, created exclusively and
//!   renamed over, never through a symlink.

pub mod config;
pub mod ipc;
pub mod jobs;
pub mod lfs;
pub mod logging;
pub mod pool;
pub mod registry;
pub mod remote;
pub mod safe_write;
pub mod server;
pub mod watch;

pub use config::Config;
pub use server::{run, Daemon, DaemonError};
