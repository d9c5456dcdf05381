//! `drsctl init [--undo]`: set a repo up for drsd and register it, or back.

use std::path::PathBuf;

use super::{internal, Shared};
use crate::ipc::{ErrorCode, Reply, WireError};
use crate::lfs::setup;

pub(crate) async fn handle(
    shared: &Shared,
    path: PathBuf,
    agent: PathBuf,
    remote: Option<String>,
    undo: bool,
) -> Result<Reply, WireError> {
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
    let repo = path.clone();
    let report = tokio::task::spawn_blocking(move || match undo {
        false => setup::init(&repo, &agent, remote.as_deref()),
        true => setup::undo(&repo),
    })
    .await
    .map_err(internal)?
    .map_err(|e| crate::server::wire_error::wire_error(ErrorCode::InvalidArgument, &e))?;
    if undo {
        // Not registered is fine: undo is for any repo init touched.
        let _ = shared.repos.remove(report.repo.clone()).await;
    } else {
        shared.repos.add(report.repo.clone()).await?;
        super::restore_registry(shared, &report.repo).await?;
    }
    Ok(Reply::Setup(report))
}
