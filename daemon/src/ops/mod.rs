//! The service layer: what the daemon does, below the handlers that speak
//! the wire and above the pool, the remotes, the registry and git. Each
//! service is a struct the daemon's shared state owns, holding what it
//! needs (no statics); a handler validates a request, calls one operation
//! and maps its result to a reply, and the workers call the same
//! operations. Operations never call a handler, and nothing here knows the
//! server above it: each service fails with its own error, which the
//! server alone turns into a wire error.
//!
//! - [`repos`]: the repo book (registered repos, their scans, kept across
//!   restarts), the per-repo write locks, and registration.
//! - [`transfer`]: objects between repos, the pool and object remotes.
//! - [`foreign`]: objects added by URL, their promotion and prefetch queue.
//! - [`workers`]: the background prefetch workers.
//! - [`gc`]: the pool's garbage collection and the partial downloads' caps.
//! - [`pool`]: the pool's figures and its verification.
//! - [`prune`]: freeing this machine's copies of objects proven elsewhere.
//! - [`team`]: joining a lab's team and leaving it (copying pool and
//!   registry between this machine's own stores and the team's).
//! - [`uploads`]: multipart uploads a killed daemon left behind.

pub mod foreign;
pub mod gc;
pub mod pool;
pub mod prune;
pub mod repos;
pub mod team;
pub mod transfer;
pub mod uploads;
pub mod workers;
