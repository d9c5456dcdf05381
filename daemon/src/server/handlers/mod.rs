//! One file per request; each returns its reply or a `{code, message}` error.

mod add_url;
mod check_out;
mod config;
mod fetch;
mod gc;
mod hydrate;
mod init;
mod promote;
mod provisional;
mod prune;
mod push;
mod repos;
mod shutdown;
mod status;
mod team;
mod team_join;
mod team_leave;
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
        Request::ReposAdd(request) => repos::add(&shared, request).await,
        Request::ReposRemove(request) => repos::remove(&shared, request).await,
        Request::ReposList => Ok(repos::list(&shared)),
        Request::PoolVerify => verify::handle(&shared, &progress).await,
        Request::Gc(GcRequest {
            dry_run,
            force,
            grace_secs,
        }) => {
            let grace = grace_secs.unwrap_or(GC_GRACE_SECS);
            let sweep = crate::ops::gc::Sweep {
                dry_run,
                force,
                grace,
            };
            gc::handle(&shared, sweep, &progress).await
        }
        Request::Shutdown => Ok(shutdown::handle(&shared)),
        Request::RepoInit(request) => init::handle(&shared, request).await,
        Request::LfsDownload(request) => transfer::download(&shared, request, &progress).await,
        Request::LfsUpload(request) => transfer::upload(&shared, request, &progress).await,
        Request::PrePush(request) => push::handle(&shared, request, &progress).await,
        Request::Promote(request) => promote::handle(&shared, request).await,
        Request::Provisional(request) => provisional::handle(&shared, request).await,
        Request::Fetch(request) => fetch::handle(&shared, request).await,
        Request::Hydrate(request) => hydrate::handle(&shared, request, &progress).await,
        Request::CheckOut(request) => check_out::handle(&shared, request).await,
        Request::AddUrl(request) => add_url::handle(&shared, request, &progress).await,
        Request::Config(_) => Ok(config::handle(&shared)),
        Request::TeamForget(request) => team::forget(&shared, request).await,
        Request::TeamJoin(request) => team_join::handle(&shared, request).await,
        Request::TeamLeave(request) => team_leave::handle(&shared, request).await,
        Request::Prune(request) => prune::handle(&shared, request, &progress).await,
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
