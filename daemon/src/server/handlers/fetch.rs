//! `fetch`: the prefetch of the objects behind named provisional pointers
//! queued (after `add-url --no-fetch`, or once a failure's cause is fixed).
//! The work is `ops::foreign::fetch`'s.

use super::Shared;
use drsd_proto::{ErrorCode, FetchReport, FetchRequest, Reply, WireError};

pub(super) async fn handle(shared: &Shared, request: FetchRequest) -> Result<Reply, WireError> {
    if !request.all && request.paths.is_empty() {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            "name the paths to fetch, or --all",
        ));
    }
    let done = shared.foreign.fetch_asked(request).await?;
    Ok(Reply::Fetched(FetchReport {
        repo: done.repo,
        fetching: done.fetching.into_iter().map(Into::into).collect(),
        hashed: done.hashed,
    }))
}
