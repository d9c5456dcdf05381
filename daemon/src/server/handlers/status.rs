use super::Shared;
use crate::ipc::{QueueReport, Reply, StatusReport};

/// Daemon, pool per tier (last background measurement), repos, queue.
pub(crate) async fn handle(shared: &Shared) -> Reply {
    Reply::Status(StatusReport {
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        uptime_secs: shared.started.elapsed().as_secs(),
        socket: shared.config.socket.clone(),
        pool_dir: shared.config.pool_dir.clone(),
        pool: shared.pool_stats.get(&shared.pool).await,
        repos: shared.repos.reports(),
        queue: QueueReport::default(),
    })
}
