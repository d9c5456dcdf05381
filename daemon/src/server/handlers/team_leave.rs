//! `team_leave`: copies back into this machine's own pool and registry what
//! its repos need (`ops::team`).

use super::Shared;
use drsd_proto::{Reply, TeamLeaveRequest, WireError};

pub(crate) async fn handle(shared: &Shared, _: TeamLeaveRequest) -> Result<Reply, WireError> {
    Ok(Reply::TeamLeft(shared.migration.leave().await?))
}
