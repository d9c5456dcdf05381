//! What the git-lfs transfer agent asks: an object out of the pool into a
//! repo (`download`), or from a repo to its object remote (`upload`). The
//! work is the transfer service's (`ops::transfer`).

use std::path::PathBuf;
use std::sync::Arc;

use super::{Progressor, Shared};
use crate::pool::Oid;
use drsd_proto::{LfsObject, LfsUploaded, Progress, Reply, Stage, WireError};

pub(super) async fn download(
    shared: &Arc<Shared>,
    repo: PathBuf,
    oid: Oid,
    size: u64,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let report = |done| {
        progress.send_now(Progress {
            stage: Stage::Download,
            done,
            total: Some(size),
            message: None,
        })
    };
    let (path, from) = shared.transfers.download(&repo, oid, size, &report).await?;
    Ok(Reply::LfsObject(LfsObject { path, from }))
}

pub(super) async fn upload(
    shared: &Arc<Shared>,
    repo: PathBuf,
    oid: Oid,
    size: u64,
    path: PathBuf,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let skipped = shared.transfers.upload(&repo, oid, size, path).await?;
    progress
        .send(Progress {
            stage: Stage::Upload,
            done: size,
            total: Some(size),
            message: None,
        })
        .await;
    Ok(Reply::LfsUploaded(LfsUploaded { skipped }))
}
