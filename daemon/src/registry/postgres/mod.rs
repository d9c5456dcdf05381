//! [`PgRegistry`]: the registry's engine on PostgreSQL, for a team: every
//! machine of a lab (a *node*: one user's daemon on one host) keeps its
//! foreign objects, prefetch queue, sent objects and Indexd registrations
//! in one database, so an object added on one node is downloaded once and
//! its content oid, once learnt, serves every node.
//!
//! Owns its tables (`drsd_reg_*`, `pg::schema`'s, made at open when
//! missing), the node's row in `drsd_team_nodes`, and the lease of
//! the jobs this node claimed. Connections, URL handling and the retry of a
//! call whose pooled connection the server closed are [`PgServer`]'s.
//!
//! What is per node and what is shared:
//! - shared: objects, jobs, sent objects and Indexd registrations (facts
//!   about stores and content, true on every node);
//! - per node: the repos' paths (`drsd_reg_repo_refs` keyed by node: a repo
//!   is a folder on one machine, and two machines may use one path for two
//!   repos) and the multipart uploads in flight (only the node that began
//!   one aborts it at its next start);
//! - the node's alone, never in the database: the journal of its uploads
//!   through a Gen3 commons' Fence ([`Registry`](crate::registry::Registry)
//!   keeps it in the node's state folder). Every member may write the
//!   database, and a forged `done` step or part list would make this node
//!   skip an upload it never made. A record another node registered under
//!   the content's did, without a location, is found in the commons itself
//!   and uploaded into (`ops/transfer/gen3/own_did.rs`). Tables
//!   `drsd_reg_fence_uploads` and `drsd_reg_fence_upload_parts`, which
//!   earlier versions made, are dropped by the schema's second migration
//!   (`pg/schema.rs`).
//!
//! **Leases.** A claim marks the job `running` with `claimed_by` = this
//! node and `lease_until` = the server's clock + the lease. One thread per
//! engine (the *heartbeat*) renews every lease of this node's running jobs
//! and the node's `last_seen` every third of the lease, until the engine is
//! dropped: a node that dies (kill -9, a power cut, a partition from the
//! database) stops renewing, its leases lapse, and a claim on any node
//! takes the job over. The server's clock alone decides a lease, so the
//! nodes' clocks need not agree. Renewing by thread (not on each call)
//! keeps a download of hours alive with no call to the engine in between.

mod nodes;
mod objects;
mod old_rows;
mod queue;
mod records;
mod rows;
mod secrets;

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use postgres::Transaction;

use super::engine::RegistryEngine;
use super::RegistryError;
use crate::pg::PgServer;

pub use nodes::{NodeName, TeamNode};
pub use secrets::PrivateUrls;

/// The lease of a claimed job when the settings name none.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);

/// The registry's engine on a PostgreSQL database shared by a team.
pub struct PgRegistry {
    server: Arc<PgServer>,
    node: NodeName,
    /// The lease, in milliseconds (what the SQL adds to the server's clock).
    lease_ms: i64,
    /// Dropped with the engine: the heartbeat thread then stops.
    heartbeat: Heartbeat,
    /// The URLs this node was given whole (`secrets.rs`).
    urls: PrivateUrls,
}

impl PgRegistry {
    /// The engine on `server` as node `node`, claims held for `lease`, the
    /// secrets of its URLs kept in `urls`: creates the tables if needed,
    /// records the node, and starts its heartbeat.
    pub fn open(
        server: Arc<PgServer>,
        node: NodeName,
        lease: Duration,
        urls: PrivateUrls,
    ) -> Result<PgRegistry, RegistryError> {
        server.with("create the registry's tables", |conn| {
            crate::pg::create_tables(conn, crate::pg::schema::REGISTRY)
        })?;
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX).max(1);
        nodes::beat(&server, &node, lease_ms)?;
        let heartbeat = Heartbeat::start(server.clone(), node.clone(), lease, lease_ms);
        let registry = PgRegistry {
            server,
            node,
            lease_ms,
            heartbeat,
            urls,
        };
        // Before anything is served; a failure (a member holding a lock)
        // does not stop the node: the next start tries again.
        if let Err(e) = registry.redact_old_rows() {
            log::warn!(
                "redacting the URLs older nodes wrote whole: {e}; tried again at the next start"
            );
        }
        Ok(registry)
    }

    /// The server as errors name it (never the password).
    pub fn server(&self) -> &str {
        self.server.shown()
    }

    pub fn node(&self) -> &NodeName {
        &self.node
    }

    /// One transaction on a pooled connection, named `op` in errors. Run
    /// again whole on a fresh connection when the server closed the pooled
    /// one (a restart): nothing of the first try was committed.
    fn tx<T>(
        &self,
        op: &'static str,
        mut f: impl FnMut(&mut Transaction<'_>) -> Result<T, postgres::Error>,
    ) -> Result<T, RegistryError> {
        Ok(self.server.with(op, |conn| {
            let mut tx = conn.client.transaction()?;
            let out = f(&mut tx)?;
            tx.commit()?;
            Ok(out)
        })?)
    }
}

impl RegistryEngine for PgRegistry {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn team(&self) -> Option<super::engine::TeamView> {
        Some(super::engine::TeamView {
            server: self.server.shown().to_string(),
            node: self.node.name.clone(),
        })
    }

    fn claims_lapsed(&self) -> bool {
        self.heartbeat.lapsed()
    }

    fn team_nodes(&self) -> Result<Vec<TeamNode>, RegistryError> {
        nodes::list(&self.server)
    }

    fn forget_team_node(&self, name: &str) -> Result<bool, RegistryError> {
        nodes::forget(&self.server, name)
    }

    fn hashed_here(
        &self,
        provisional: &crate::pool::Oid,
        size: u64,
    ) -> Result<Option<crate::pool::Oid>, RegistryError> {
        self.urls.own_hash(provisional, size)
    }

    fn record_hashed_here(
        &self,
        provisional: &crate::pool::Oid,
        size: u64,
        content: &crate::pool::Oid,
    ) -> Result<(), RegistryError> {
        self.urls.keep_hash(provisional, size, content)
    }
}

/// The thread that renews this node's leases and `last_seen`.
struct Heartbeat {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// When the leases were last renewed, and for how long.
    renewed: Arc<Mutex<Instant>>,
    lease: Duration,
}

impl Heartbeat {
    fn start(server: Arc<PgServer>, node: NodeName, lease: Duration, lease_ms: i64) -> Heartbeat {
        let (stop, stopped) = mpsc::channel::<()>();
        let every = (lease / 3).max(Duration::from_millis(100));
        let renewed = Arc::new(Mutex::new(Instant::now()));
        let beaten = renewed.clone();
        let thread = std::thread::Builder::new()
            .name("drsd-team-heartbeat".into())
            .spawn(move || loop {
                match stopped.recv_timeout(every) {
                    Err(RecvTimeoutError::Timeout) => {}
                    // The engine was dropped (or asked us to stop).
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
                // Taken before the call: the lease counts from the server's
                // clock when it answers, at least this late.
                let asked = Instant::now();
                match nodes::beat(&server, &node, lease_ms) {
                    Ok(()) => *crate::lock::lock(&beaten) = asked,
                    // The database is away: claims lapse if it stays away,
                    // which is what a lease is for. Said once per beat.
                    Err(e) => log::warn!("renewing {}'s leases: {e}", node.name),
                }
            })
            .ok();
        if thread.is_none() {
            log::warn!("no heartbeat thread: this node's claims lapse after the lease");
        }
        Heartbeat {
            stop: Some(stop),
            thread,
            renewed,
            lease,
        }
    }

    /// True once a lease's length has passed since the last renewal.
    fn lapsed(&self) -> bool {
        crate::lock::lock(&self.renewed).elapsed() >= self.lease
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests;
