//! `prune`: frees this machine's copies of the objects nothing here needs
//! and that are proven elsewhere (`ops::prune`), with a progress event per
//! object as it is decided.

use super::{Progressor, Shared};
use crate::ops::prune::Ask;
use drsd_proto::{ErrorCode, Progress, PruneReport, PruneRequest, Reply, Stage, WireError};

pub(crate) async fn handle(
    shared: &Shared,
    request: PruneRequest,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let copies = request.copies.unwrap_or(drsd_proto::PRUNE_COPIES);
    if copies == 0 {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            "--copies 0 would free the last copy: at least 1 place other than this machine must hold each object",
        ));
    }
    let ask = Ask {
        repos: request.repos.iter().map(|r| request.cwd.join(r)).collect(),
        dry_run: request.dry_run,
        copies,
    };
    let tell = |done: u64, total: u64, line: &drsd_proto::PrunedObject, places: &[String]| {
        progress.send_now(Progress {
            stage: Stage::Prune,
            done,
            total: Some(total),
            message: Some(PruneReport::line(line, places, request.dry_run)),
        });
    };
    Ok(Reply::Pruned(shared.prune.run(ask, &tell).await?))
}
