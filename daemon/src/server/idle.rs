//! The idle timer of a daemon started on demand (`drsd serve --idle-timeout`):
//! it stops once no client has been connected and no prefetch has been under
//! way or due for that long. A failed job due later waits for the next
//! start, which the next client (a git hook, drsctl) brings about; a managed
//! daemon (systemd, launchd) runs without the timer.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Shared;
use crate::lock::lock;

/// When the daemon last had something to do.
pub(crate) struct Activity(Mutex<Instant>);

impl Default for Activity {
    fn default() -> Activity {
        Activity(Mutex::new(Instant::now()))
    }
}

impl Activity {
    pub fn touch(&self) {
        *lock(&self.0) = Instant::now();
    }

    fn quiet_for(&self) -> Duration {
        lock(&self.0).elapsed()
    }
}

/// Resolves once the daemon has been idle for its idle timeout; never when
/// it has none.
pub(crate) async fn idle(shared: Arc<Shared>) {
    let Some(limit) = shared.config.idle_timeout else {
        return std::future::pending().await;
    };
    let tick = (limit / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
    loop {
        tokio::time::sleep(tick).await;
        if busy(&shared, limit).await {
            shared.activity.touch();
        } else if shared.activity.quiet_for() >= limit {
            log::info!("idle for {limit:?}: stopping");
            return;
        }
    }
}

/// A connection is open, a prefetch runs, or one is due within `limit`.
async fn busy(shared: &Shared, limit: Duration) -> bool {
    !shared.tasks.is_empty() || shared.workers.busy_within(limit).await
}
