//! `pool verify`: re-hashing every pool entry, moving the bad ones aside
//! (`ops::pool`), with progress before and after (a full pass can take
//! minutes).

use super::{internal, Progressor, Shared};
use drsd_proto::{Progress, Reply, VerifyReport, WireError};

/// Re-hashes every pool entry and moves the bad ones aside. Progress: one
/// event with the entry count before the work, one after it.
pub(crate) async fn handle(shared: &Shared, progress: &Progressor) -> Result<Reply, WireError> {
    let size = shared.care.size().await.map_err(internal)?;
    let entries = size.entries;
    progress
        .send(Progress {
            stage: drsd_proto::Stage::Verify,
            done: 0,
            total: Some(entries),
            message: Some(format!(
                "re-hashing {entries} entries, {} bytes",
                size.bytes
            )),
        })
        .await;
    let bad = shared.care.verify().await.map_err(internal)?;
    progress
        .send(Progress {
            stage: drsd_proto::Stage::Verify,
            done: entries,
            total: Some(entries),
            message: None,
        })
        .await;
    Ok(Reply::Verify(VerifyReport { entries, bad }))
}
