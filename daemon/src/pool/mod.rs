//! The pool: one content-addressed, two-tier store shared by every repo.
//!
//! Small blobs live in a kv engine (SQLite by default; PostgreSQL for a
//! team), large ones as read-only files (or PostgreSQL large objects); [`Pool`] routes by length. Engines implement
//! [`Backend`], and every engine passes one contract suite (`tests.rs`).

mod backend;
mod error;
mod files;
mod local;
mod mem;
pub(crate) mod node_dir;
mod own;
mod pg_kv;
mod pg_lo;
mod pg_pins;
mod pg_seen;
mod pins;
mod seen;
mod sqlite;
mod store;
mod verified;

#[cfg(test)]
mod tests;

pub use backend::{Backend, Blob, Staged, TierStats};
pub use drsd_proto::Oid;
pub use error::{PoolError, Result};
pub use files::Placed;
pub use local::LocalEngine;
pub(crate) use local::{start_writeback, WRITEBACK_EVERY};
pub use mem::MemEngine;
pub use node_dir::{NodeDirError, NodeFile};
pub use own::{OwnFile, OwnPoolReader};
pub use pg_kv::PgKvEngine;
pub use pg_lo::PgLoEngine;
pub use pg_pins::{PgPins, PIN_LEASE};
pub use pg_seen::PgGcRecords;
pub use pins::{MemPins, Pin, PinTable};
pub use seen::{GcRecords, SeenLog};
pub use sqlite::SqliteEngine;
pub use store::{
    BadEntry, Batch, Pool, PoolStats, Put, SweepReport, Swept, Tier, TierReport, DEFAULT_THRESHOLD,
};
