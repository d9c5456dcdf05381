//! `hydrate`: the objects of HEAD's pointers into the repo's
//! `.git/lfs/objects` (`ops::transfer`), so git-lfs transfers nothing when
//! `drsctl clone` checks the files out.

use std::sync::Arc;

use super::{Progressor, Shared};
use drsd_proto::{HydrateRequest, Progress, Reply, WireError};

pub(super) async fn handle(
    shared: &Arc<Shared>,
    request: HydrateRequest,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let HydrateRequest { repo } = request;
    let report = |done, total| {
        progress.send_now(Progress {
            stage: drsd_proto::Stage::Hydrate,
            done,
            total: Some(total),
            message: None,
        })
    };
    let hydrated = shared.transfers.hydrate_repo(&repo, &report).await?;
    Ok(Reply::Hydrated(hydrated))
}
