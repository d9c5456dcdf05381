//! `provisional`: the repo's pointers that still carry a provisional oid
//! (from an ETag), and where each object stands: its prefetch job's state,
//! or `hashed` once only `drsctl promote` is missing.

use super::Shared;
use drsd_proto::{ProvisionalReport, ProvisionalRequest, Reply, WireError};

pub(super) async fn handle(
    shared: &Shared,
    request: ProvisionalRequest,
) -> Result<Reply, WireError> {
    let (repo, pointers) = shared.foreign.provisional(request.cwd).await?;
    Ok(Reply::Provisional(ProvisionalReport {
        repo,
        pointers: pointers.into_iter().map(Into::into).collect(),
    }))
}
