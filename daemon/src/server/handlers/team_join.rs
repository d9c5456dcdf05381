//! `team_join`: copies this machine's own pool and registry into the
//! team's (`ops::team`).

use super::Shared;
use drsd_proto::{Reply, TeamJoinRequest, WireError};

pub(crate) async fn handle(shared: &Shared, _: TeamJoinRequest) -> Result<Reply, WireError> {
    Ok(Reply::TeamJoined(shared.migration.join().await?))
}
