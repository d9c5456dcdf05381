//! `status`: what the daemon, its pool, its repos and its job queue look
//! like now. Built from what is kept in memory (the last pool measurement,
//! the repos' last scans) plus two queue reads, so it stays fast with many
//! repos and a large pool.

use super::Shared;
use drsd_proto::{QueueReport, Reply, StatusReport};

/// Daemon, pool per tier (last background measurement), repos, queue.
pub(crate) async fn handle(shared: &Shared) -> Reply {
    Reply::Status(StatusReport {
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        uptime_secs: shared.started.elapsed().as_secs(),
        idle_timeout_secs: shared.config.idle_timeout.map(|t| t.as_secs()),
        socket: shared.config.socket.clone(),
        pool_dir: shared.config.pool_dir.clone(),
        pool: shared.pool_stats.get(&shared.pool).await,
        repos: shared.repos.reports(),
        queue: queue(shared).await,
        trusted_at_their_word: shared.remote.trusted_sources(),
    })
}

async fn queue(shared: &Shared) -> QueueReport {
    let registry = shared.registry.clone();
    let read = tokio::task::spawn_blocking(move || {
        Ok::<_, crate::registry::RegistryError>((registry.job_counts()?, registry.open_jobs(100)?))
    })
    .await;
    let (counts, open) = match read {
        Ok(Ok(both)) => both,
        Ok(Err(e)) => {
            log::warn!("reading the job queue: {e}");
            Default::default()
        }
        Err(_) => Default::default(),
    };
    QueueReport {
        queued: counts.queued,
        running: counts.running,
        retrying: counts.retrying,
        failed: counts.failed,
        held: counts.held,
        done: counts.done,
        active: shared.running.report(),
        open: open.into_iter().map(Into::into).collect(),
    }
}
