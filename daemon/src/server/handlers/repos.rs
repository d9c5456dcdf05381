//! `drsctl repos add|remove|list`: the registered repos
//! (`ops::repos::Registrar`).

use std::path::PathBuf;

use super::Shared;
use drsd_proto::{ErrorCode, Reply, RepoPath, WireError};

pub(crate) async fn add(shared: &Shared, request: RepoPath) -> Result<Reply, WireError> {
    let path = absolute(request.path)?;
    let repo = shared.registrar.register(path.clone()).await?;
    // Each git hook says so: a commit's large objects bound for a Gen3
    // commons get their md5 before the push asks for it.
    shared.transfers.hash_ahead(&path).await;
    Ok(Reply::Repo { repo })
}

pub(crate) async fn remove(shared: &Shared, request: RepoPath) -> Result<Reply, WireError> {
    let repo = shared.registrar.unregister(absolute(request.path)?).await?;
    Ok(Reply::Repo { repo })
}

pub(crate) fn list(shared: &Shared) -> Reply {
    Reply::Repos {
        repos: shared.registrar.list(),
    }
}

/// The daemon's working folder is not the client's: paths must be absolute.
fn absolute(path: PathBuf) -> Result<PathBuf, WireError> {
    if path.is_absolute() {
        Ok(path)
    } else {
        let why = format!(
            "repo path {} is relative; send an absolute path",
            path.display()
        );
        Err(WireError::new(ErrorCode::InvalidArgument, why))
    }
}
