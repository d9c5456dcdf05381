//! `check_out`: a clone's pointer files replaced by their objects from the
//! pool (`ops::transfer`), after git checked them out as pointers.

use std::sync::Arc;

use super::Shared;
use drsd_proto::{CheckOutRequest, Reply, WireError};

pub(super) async fn handle(
    shared: &Arc<Shared>,
    request: CheckOutRequest,
) -> Result<Reply, WireError> {
    let CheckOutRequest { repo } = request;
    let report = shared.transfers.check_out(&repo).await?;
    Ok(Reply::CheckedOut(report))
}
