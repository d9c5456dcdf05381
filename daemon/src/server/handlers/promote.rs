//! `promote`: provisional pointers whose object was hashed become content
//! pointers, in the work tree and the index; the user commits. With
//! `retry`, the prefetch jobs of those pointers that `failed` for good are
//! queued again first. The work is `ops::foreign::promotion`'s.

use std::sync::Arc;

use super::Shared;
use drsd_proto::{ErrorCode, PromoteReport, PromoteRequest, Reply, WireError};

pub(super) async fn handle(
    shared: &Arc<Shared>,
    request: PromoteRequest,
) -> Result<Reply, WireError> {
    if !request.all && request.paths.is_empty() {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            "name the paths to promote, or --all",
        ));
    }
    let done = shared.foreign.promote_asked(request).await?;
    Ok(Reply::Promoted(PromoteReport {
        repo: done.repo,
        rewritten: done.rewritten,
        waiting: done.waiting.into_iter().map(Into::into).collect(),
        changed: done.changed,
    }))
}
