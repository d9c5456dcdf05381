//! `drsctl init [--undo]`: set a repo up for drsd and register it, or back
//! (`ops::repos::Registrar`). The settings are checked once, into typed
//! values, before anything changes.

use super::Shared;
use crate::ops::repos::SetupAsk;
use drsd_proto::{ErrorCode, Reply, RepoInitRequest, WireError};

pub(crate) async fn handle(shared: &Shared, request: RepoInitRequest) -> Result<Reply, WireError> {
    let RepoInitRequest {
        path,
        agent,
        remote,
        indexd,
        authz,
        undo,
        no_remote,
    } = request;
    if !path.is_absolute() || !agent.is_absolute() {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            format!(
                "send absolute paths (repo {}, agent {})",
                path.display(),
                agent.display()
            ),
        ));
    }
    if no_remote && remote.is_some() {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            "give --remote or --no-remote, not both",
        ));
    }
    let ask = SetupAsk {
        remote,
        indexd,
        authz,
        forget_remote: no_remote,
    };
    let plan = ask.check()?;
    let report = match undo {
        false => shared.registrar.set_up(path, agent, plan).await?,
        true => shared.registrar.take_down(path).await?,
    };
    Ok(Reply::Setup(report))
}
