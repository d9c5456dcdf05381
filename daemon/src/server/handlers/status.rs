//! `status`: what the daemon, its pool, its repos and its job queue look
//! like now. Built from what is kept in memory (the last pool measurement,
//! the repos' last scans) plus two queue reads, so it stays fast with many
//! repos and a large pool.

use super::Shared;
use drsd_proto::{Reply, StatusReport};

/// Daemon, pool per tier (last background measurement), repos, queue.
pub(crate) async fn handle(shared: &Shared) -> Reply {
    // The registry's reads at once: each waits at most `STATUS_WAIT`, so a
    // team database that hangs delays the answer by that, not three times.
    let (queue, commons_uploads, team) = tokio::join!(
        shared.workers.queue(),
        shared.transfers.unfinished_commons_uploads(),
        shared.workers.team()
    );
    Reply::Status(Box::new(StatusReport {
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        uptime_secs: shared.started.elapsed().as_secs(),
        idle_timeout_secs: shared.config.idle_timeout.map(|t| t.as_secs()),
        socket: shared.config.socket.clone(),
        pool_dir: shared.config.pool_dir.clone(),
        pool: shared.care.figures().await,
        repos: shared.registrar.list(),
        queue,
        trusted_at_their_word: shared.transfers.trusted_sources(),
        commons_uploads,
        registry_engine: shared.workers.registry_engine().to_string(),
        team,
    }))
}
