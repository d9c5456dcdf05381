use std::path::PathBuf;

use super::Shared;
use crate::ipc::{ErrorCode, Reply, WireError};

pub(crate) async fn add(shared: &Shared, path: PathBuf) -> Result<Reply, WireError> {
    let path = absolute(path)?;
    let repo = shared.repos.add(path).await?;
    super::restore_registry(shared, &repo.path).await?;
    Ok(Reply::Repo { repo })
}

pub(crate) async fn remove(shared: &Shared, path: PathBuf) -> Result<Reply, WireError> {
    let path = absolute(path)?;
    let repo = shared.repos.remove(path).await?;
    Ok(Reply::Repo { repo })
}

pub(crate) fn list(shared: &Shared) -> Reply {
    Reply::Repos {
        repos: shared.repos.reports(),
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
