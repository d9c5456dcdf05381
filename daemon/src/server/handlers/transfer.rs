//! What the git-lfs transfer agent asks: an object out of the pool into a
//! repo (`download`), or from a repo to its object remote (`upload`). The
//! work is the transfer service's (`ops::transfer`).

use std::sync::Arc;

use super::{Progressor, Shared};
use drsd_proto::{
    LfsDownloadRequest, LfsObject, LfsUploadRequest, LfsUploaded, Progress, Reply, Stage, WireError,
};

pub(super) async fn download(
    shared: &Arc<Shared>,
    request: LfsDownloadRequest,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let LfsDownloadRequest { repo, oid, size } = request;
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
    request: LfsUploadRequest,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let LfsUploadRequest {
        repo,
        oid,
        size,
        path,
    } = request;
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
