//! `team_forget`: removes a gone node's published roots (`ops::gc`).

use super::Shared;
use drsd_proto::{Reply, TeamForgetReport, TeamForgetRequest, WireError};

pub(crate) async fn forget(
    shared: &Shared,
    TeamForgetRequest { node }: TeamForgetRequest,
) -> Result<Reply, WireError> {
    let gone = shared.gc.forget_node(node.clone()).await?;
    Ok(Reply::TeamForgot(TeamForgetReport {
        node,
        repos: gone.repos,
        roots: gone.roots,
        listed: gone.listed,
    }))
}
