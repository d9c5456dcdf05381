//! One file per request; each returns its reply or a `{code, message}` error.

mod add_url;
mod gc;
mod hydrate;
mod init;
mod promote;
mod provisional;
mod push;
mod repos;
mod shutdown;
mod status;
mod transfer;
mod verify;

use std::sync::Arc;

use tokio::sync::mpsc;

use super::wire_error::wire_error;
use super::Shared;
use drsd_proto::*;

/// Sends a request's progress events; the final answer goes through [`handle`].
pub(crate) struct Progressor {
    id: u64,
    tx: mpsc::Sender<ResponseFrame>,
}

impl Progressor {
    pub async fn send(&self, progress: Progress) {
        let _ = self
            .tx
            .send(ResponseFrame::progress(self.id, progress))
            .await;
    }

    /// From synchronous code: drops the event when the connection is slow
    /// rather than waiting (the next one carries the newer figure).
    pub fn send_now(&self, progress: Progress) {
        let _ = self.tx.try_send(ResponseFrame::progress(self.id, progress));
    }
}

pub(crate) async fn handle(
    shared: Arc<Shared>,
    frame: RequestFrame,
    tx: mpsc::Sender<ResponseFrame>,
) {
    let RequestFrame { id, request } = frame;
    let method = request.method();
    log::debug!("request {id}: {method}");
    let progress = Progressor { id, tx: tx.clone() };
    let outcome = match request {
        Request::Status => Ok(status::handle(&shared).await),
        Request::ReposAdd(RepoPath { path }) => repos::add(&shared, path).await,
        Request::ReposRemove(RepoPath { path }) => repos::remove(&shared, path).await,
        Request::ReposList => Ok(repos::list(&shared)),
        Request::PoolVerify => verify::handle(&shared, &progress).await,
        Request::Gc(GcRequest {
            dry_run,
            force,
            grace_secs,
        }) => {
            let grace = grace_secs.unwrap_or(drsd_proto::GC_GRACE_SECS);
            gc::handle(
                &shared,
                gc::Sweep {
                    dry_run,
                    force,
                    grace,
                },
                &progress,
            )
            .await
        }
        Request::Shutdown => Ok(shutdown::handle(&shared)),
        Request::RepoInit(RepoInitRequest {
            path,
            agent,
            remote,
            undo,
        }) => init::handle(&shared, path, agent, remote, undo).await,
        Request::LfsDownload(LfsDownloadRequest { repo, oid, size }) => {
            transfer::download(&shared, repo, oid, size, &progress).await
        }
        Request::LfsUpload(LfsUploadRequest {
            repo,
            oid,
            size,
            path,
        }) => transfer::upload(&shared, repo, oid, size, path, &progress).await,
        Request::PrePush(PrePushRequest {
            repo,
            remote,
            updates,
        }) => push::handle(&shared, repo, remote, updates, &progress).await,
        Request::Promote(PromoteRequest {
            cwd,
            paths,
            all,
            retry,
        }) => promote::handle(&shared, cwd, paths, all, retry).await,
        Request::Provisional(ProvisionalRequest { cwd }) => provisional::handle(&shared, cwd).await,
        Request::Hydrate(HydrateRequest { repo }) => {
            hydrate::handle(&shared, repo, &progress).await
        }
        // `from` is refused before this (`Request::check_bounds`).
        Request::AddUrl(AddUrlRequest {
            cwd,
            entries,
            force,
            no_fetch,
            ..
        }) => add_url::handle(&shared, cwd, entries, force, no_fetch, &progress).await,
        Request::Hello(_) => Err(WireError::new(
            ErrorCode::BadRequest,
            "hello was already said",
        )),
    };
    let answer = match outcome {
        Ok(reply) => ResponseFrame::result(id, reply),
        Err(error) => {
            log::debug!("request {id} ({method}) failed: {}", error.message);
            ResponseFrame::error(Some(id), error)
        }
    };
    let _ = tx.send(answer).await;
}

/// An error on the daemon's side: `internal`, or `no_space` when a full file
/// system is behind it.
pub(crate) fn internal<E: std::error::Error + 'static>(e: E) -> WireError {
    wire_error(ErrorCode::Internal, &e)
}
