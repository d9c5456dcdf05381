//! The pool as `status` and `drsctl pool verify` see it: its figures per
//! tier, measured in the background (`stats.rs`), and the re-hashing of
//! every entry. Storing and reading objects is the pool's own
//! ([`crate::pool`]); this service owns what is said about it.

mod stats;

use std::sync::Arc;

use crate::blocking;
use crate::pool::{Pool, PoolError};
use drsd_proto::{BadEntryReport, PoolStatsReport};

pub use stats::REFRESH;

/// The pool's figures and its verification.
pub struct PoolCare {
    pool: Arc<Pool>,
    stats: stats::PoolStatsCache,
}

/// How much a verification will read: every entry of every tier.
#[derive(Debug, Clone, Copy)]
pub struct PoolSize {
    pub entries: u64,
    pub bytes: u64,
}

impl PoolCare {
    pub fn new(pool: Arc<Pool>) -> PoolCare {
        PoolCare {
            pool,
            stats: Default::default(),
        }
    }

    /// The last figures, with their age; measured now if there are none yet.
    pub async fn figures(&self) -> PoolStatsReport {
        self.stats.get(&self.pool).await
    }

    /// Measures the pool again (the background task, and after what changed it).
    pub async fn refresh(&self) {
        self.stats.refresh(&self.pool).await;
    }

    /// Every entry and byte the pool holds now, counted.
    pub async fn size(&self) -> Result<PoolSize, PoolError> {
        let pool = self.pool.clone();
        let stats = blocking(move || pool.stats()).await?;
        Ok(PoolSize {
            entries: stats.tiers.iter().map(|t| t.stats.entries).sum(),
            bytes: stats.tiers.iter().map(|t| t.stats.bytes).sum(),
        })
    }

    /// Re-hashes every entry and moves the bad ones aside; the figures are
    /// measured again after.
    pub async fn verify(&self) -> Result<Vec<BadEntryReport>, PoolError> {
        let pool = self.pool.clone();
        let bad = blocking(move || pool.verify()).await?;
        self.refresh().await;
        Ok(bad
            .into_iter()
            .map(|b| BadEntryReport {
                key: hex::encode(&b.key),
                tier: b.tier,
                problem: b.problem,
                quarantined: b.quarantined,
            })
            .collect())
    }

    /// The pool itself, for the in-process tests.
    #[cfg(test)]
    pub(crate) fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }
}
