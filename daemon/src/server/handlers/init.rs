//! `drsctl init [--undo]`: set a repo up for drsd and register it, or back
//! (`ops::repos::Registrar`).

use super::Shared;
use drsd_proto::{ErrorCode, Reply, RepoInitRequest, WireError};

pub(crate) async fn handle(shared: &Shared, request: RepoInitRequest) -> Result<Reply, WireError> {
    let RepoInitRequest {
        path,
        agent,
        remote,
        undo,
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
    let report = match undo {
        false => shared.registrar.set_up(path, agent, remote).await?,
        true => shared.registrar.take_down(path).await?,
    };
    Ok(Reply::Setup(report))
}
