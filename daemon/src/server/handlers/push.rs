//! `pre_push`: before git-lfs runs, every object the push introduces goes
//! to the repo's object remote (`ops::transfer`'s pre-push work); the reply
//! says what became of each.

use std::sync::Arc;

use super::{Progressor, Shared};
use drsd_proto::{PrePushRequest, Progress, Reply, WireError};

pub(super) async fn handle(
    shared: &Arc<Shared>,
    request: PrePushRequest,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let PrePushRequest {
        repo,
        remote,
        updates,
    } = request;
    let report = |done, total| {
        progress.send_now(Progress {
            stage: drsd_proto::Stage::Upload,
            done,
            total: Some(total),
            message: None,
        })
    };
    let pushed = shared
        .transfers
        .pre_push(&repo, &remote, updates, &report)
        .await?;
    Ok(Reply::PrePush(pushed))
}
