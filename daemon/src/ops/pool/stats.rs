//! Pool figures for `status`, measured in the background.
//!
//! Counting the large tier lists and stats every file, which grows with the
//! pool; a status request must stay sub-millisecond whatever the pool's
//! size, so it reads the last measurement (and says how old it is).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::lock::lock;
use crate::pool::{Pool, PoolStats};
use drsd_proto::{PoolStatsReport, TierLine};

/// How often the background task measures the pool.
pub const REFRESH: Duration = Duration::from_secs(10);

#[derive(Default)]
pub(crate) struct PoolStatsCache {
    last: Mutex<Option<(Instant, PoolStatsReport)>>,
}

impl PoolStatsCache {
    /// The last figures with their age in seconds; measured now if there are none yet.
    pub async fn get(&self, pool: &Arc<Pool>) -> PoolStatsReport {
        let cached = lock(&self.last).clone();
        match cached {
            Some((at, mut report)) => {
                report.age_secs = at.elapsed().as_secs();
                report
            }
            None => self.refresh(pool).await,
        }
    }

    /// Measures the pool (off the async threads) and keeps the figures.
    pub async fn refresh(&self, pool: &Arc<Pool>) -> PoolStatsReport {
        let measuring = pool.clone();
        let report = match crate::blocking(move || measuring.stats()).await {
            Ok(stats) => PoolStatsReport::from(stats),
            Err(e) => return unreadable(pool, &e),
        };
        *lock(&self.last) = Some((Instant::now(), report.clone()));
        report
    }
}

impl From<PoolStats> for PoolStatsReport {
    fn from(stats: PoolStats) -> Self {
        let tiers = stats
            .tiers
            .into_iter()
            .map(|t| TierLine {
                tier: t.tier,
                engine: t.engine,
                entries: t.stats.entries,
                bytes: t.stats.bytes,
            })
            .collect();
        PoolStatsReport {
            threshold: stats.threshold,
            tiers,
            age_secs: 0,
        }
    }
}

/// No tiers rather than a failed status: the rest of the status still helps.
fn unreadable(pool: &Pool, e: &dyn std::fmt::Display) -> PoolStatsReport {
    log::warn!("reading pool stats: {e}");
    PoolStatsReport {
        threshold: pool.threshold(),
        tiers: Vec::new(),
        age_secs: 0,
    }
}
