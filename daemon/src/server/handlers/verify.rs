//! `pool verify`: re-hashing every pool entry, moving the bad ones aside,
//! with progress before and after (a full pass can take minutes).

use super::{internal, Progressor, Shared};
use crate::blocking;
use drsd_proto::{BadEntryReport, Progress, Reply, VerifyReport, WireError};

/// Re-hashes every pool entry and moves the bad ones aside. Progress: one event with the entry count
/// before the work, one after it.
pub(crate) async fn handle(shared: &Shared, progress: &Progressor) -> Result<Reply, WireError> {
    let pool = shared.pool.clone();
    let stats = blocking(move || pool.stats()).await.map_err(internal)?;
    let entries: u64 = stats.tiers.iter().map(|t| t.stats.entries).sum();
    let bytes: u64 = stats.tiers.iter().map(|t| t.stats.bytes).sum();
    progress
        .send(Progress {
            stage: drsd_proto::Stage::Verify,
            done: 0,
            total: Some(entries),
            message: Some(format!("re-hashing {entries} entries, {bytes} bytes")),
        })
        .await;
    let pool = shared.pool.clone();
    let bad = blocking(move || pool.verify()).await.map_err(internal)?;
    progress
        .send(Progress {
            stage: drsd_proto::Stage::Verify,
            done: entries,
            total: Some(entries),
            message: None,
        })
        .await;
    shared.pool_stats.refresh(&shared.pool).await;
    let bad = bad
        .into_iter()
        .map(|b| BadEntryReport {
            key: hex::encode(&b.key),
            tier: b.tier,
            problem: b.problem,
            quarantined: b.quarantined,
        })
        .collect();
    Ok(Reply::Verify(VerifyReport { entries, bad }))
}
