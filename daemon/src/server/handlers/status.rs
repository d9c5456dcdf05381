use super::Shared;
use crate::ipc::{PoolStatsReport, QueueReport, Reply, StatusReport};

/// Daemon, pool per tier, repos, queue. Pool figures that cannot be read are
/// reported as no tiers rather than failing the whole status.
pub(crate) async fn handle(shared: &Shared) -> Reply {
    let pool = shared.pool.clone();
    let stats = tokio::task::spawn_blocking(move || pool.stats()).await;
    let pool = match stats {
        Ok(Ok(stats)) => PoolStatsReport::from(stats),
        Ok(Err(e)) => {
            log::warn!("reading pool stats: {e}");
            PoolStatsReport { threshold: shared.pool.threshold(), tiers: Vec::new() }
        }
        Err(e) => {
            log::warn!("reading pool stats: {e}");
            PoolStatsReport { threshold: shared.pool.threshold(), tiers: Vec::new() }
        }
    };
    Reply::Status(StatusReport {
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        uptime_secs: shared.started.elapsed().as_secs(),
        socket: shared.config.socket.clone(),
        pool_dir: shared.config.pool_dir.clone(),
        pool,
        repos: shared.repos.reports(),
        queue: QueueReport::default(),
    })
}
