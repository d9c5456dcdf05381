//! What the git-lfs transfer agent asks: an object out of the pool into a
//! repo (`download`), or from a repo to its object remote (`upload`). The
//! work is the transfer service's (`ops::transfer`).

use std::path::PathBuf;
use std::sync::Arc;

use super::{Progressor, Shared};
use crate::ipc::{ErrorCode, Progress, Reply, WireError};
use crate::pool::{Oid, PoolError};

fn parse_oid(oid: &str) -> Result<Oid, WireError> {
    oid.parse()
        .map_err(|e: PoolError| WireError::new(ErrorCode::InvalidArgument, e.to_string()))
}

pub(super) async fn download(
    shared: &Arc<Shared>,
    repo: PathBuf,
    oid: &str,
    size: u64,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let oid = parse_oid(oid)?;
    let report = |done| {
        progress.send_now(Progress {
            stage: "download".into(),
            done,
            total: Some(size),
            message: None,
        })
    };
    let (path, from) = shared.transfers.download(&repo, oid, size, &report).await?;
    Ok(Reply::LfsObject {
        path,
        from: from.as_str().into(),
    })
}

pub(super) async fn upload(
    shared: &Arc<Shared>,
    repo: PathBuf,
    oid: &str,
    size: u64,
    path: PathBuf,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let oid = parse_oid(oid)?;
    let skipped = shared.transfers.upload(&repo, oid, size, path).await?;
    progress
        .send(Progress {
            stage: "upload".into(),
            done: size,
            total: Some(size),
            message: None,
        })
        .await;
    Ok(Reply::LfsUploaded { skipped })
}
