//! One client connection: peer check, handshake, then requests, each run as
//! its own task so a slow one does not hold up the others; answers go out
//! through one writer task.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use interprocess::local_socket::tokio::{prelude::*, Stream};
use tokio::io::ReadHalf;
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};

use super::{handlers, Shared};
use drsd_proto::codec::{JsonLines, Line};
use drsd_proto::paths::current_uid;
use drsd_proto::*;

/// Answers queued for the writer before request tasks wait on it.
pub(crate) const OUTBOX: usize = 64;

pub(crate) async fn serve(shared: Arc<Shared>, stream: Stream) {
    let refused = check_peer(&stream).err();
    let (recv, send) = tokio::io::split(stream);
    let mut writer = FramedWrite::new(send, JsonLines::new(MAX_RESPONSE_LINE));
    if let Some(error) = refused {
        log::warn!("refused a connection: {}", error.message);
        let _ = writer.send(&ResponseFrame::error(None, error)).await;
        return;
    }
    let (tx, mut rx) = mpsc::channel::<ResponseFrame>(OUTBOX);
    let write = async move {
        while let Some(frame) = rx.recv().await {
            if writer.send(&frame).await.is_err() {
                break; // the client went away; its requests finish unheard
            }
        }
    };
    tokio::join!(read_requests(shared, recv, tx), write);
}

/// Only our own user may talk to us, whatever the socket's mode says.
fn check_peer(stream: &Stream) -> Result<(), WireError> {
    let denied = |why: String| WireError::new(ErrorCode::PermissionDenied, why);
    let creds = stream
        .peer_creds()
        .map_err(|e| denied(format!("cannot tell who the peer is: {e}")))?;
    match creds.euid() {
        Some(uid) if uid == current_uid() => Ok(()),
        Some(uid) => Err(denied(format!(
            "this drsd serves uid {} only; the peer runs as uid {uid}",
            current_uid()
        ))),
        None => Err(denied("the OS does not tell the peer's uid".into())),
    }
}

async fn read_requests(
    shared: Arc<Shared>,
    recv: ReadHalf<Stream>,
    tx: mpsc::Sender<ResponseFrame>,
) {
    let mut lines = FramedRead::new(recv, JsonLines::new(MAX_REQUEST_LINE));
    let mut greeted = false;
    loop {
        let line = tokio::select! {
            // Stopping: take no new requests; those running finish.
            _ = shared.stop.cancelled() => return,
            line = lines.next() => line,
        };
        let frame = match line {
            None => return,
            Some(Err(e)) => {
                log::debug!("reading a request: {e}");
                return;
            }
            Some(Ok(line)) => match parse(line) {
                Ok(frame) => frame,
                Err(answer) => {
                    let _ = tx.send(*answer).await;
                    continue;
                }
            },
        };
        match (&frame.request, greeted) {
            (Request::Hello(HelloRequest { version, client }), false) => {
                let answer = hello(frame.id, *version, client);
                let ok = matches!(answer.body, Body::Result { .. });
                let _ = tx.send(answer).await;
                if !ok {
                    return;
                }
                greeted = true;
            }
            (_, false) => {
                let error = WireError::new(ErrorCode::HandshakeRequired, "send hello first");
                let _ = tx.send(ResponseFrame::error(Some(frame.id), error)).await;
            }
            (_, true) => {
                shared
                    .tasks
                    .spawn(handlers::handle(shared.clone(), frame, tx.clone()));
            }
        }
    }
}

/// A request frame, or the error answer for a line that is not one.
fn parse(line: Line) -> Result<RequestFrame, Box<ResponseFrame>> {
    let bad =
        |code, message: String| Box::new(ResponseFrame::error(None, WireError::new(code, message)));
    let text = match line {
        Line::Text(text) => text,
        Line::TooLong => {
            let why = format!("request line longer than {MAX_REQUEST_LINE} bytes; skipped");
            return Err(bad(ErrorCode::TooLong, why));
        }
        Line::NotText => {
            return Err(bad(
                ErrorCode::BadRequest,
                "request line is not UTF-8".into(),
            ))
        }
    };
    let frame = serde_json::from_str::<RequestFrame>(&text).map_err(|e| {
        // Answer with the id when the line has a readable one.
        let id = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("id").and_then(|id| id.as_u64()));
        Box::new(ResponseFrame::error(
            id,
            WireError::new(ErrorCode::BadRequest, format!("not a request: {e}")),
        ))
    })?;
    match frame.request.check_bounds() {
        Ok(()) => Ok(frame),
        Err(refused) => Err(Box::new(ResponseFrame::error(Some(frame.id), refused))),
    }
}

fn hello(id: u64, version: u32, client: &str) -> ResponseFrame {
    if version != PROTOCOL_VERSION {
        let why = format!(
            "client {client:?} speaks protocol {version}, this drsd {PROTOCOL_VERSION}; upgrade the older one"
        );
        return ResponseFrame::error(Some(id), WireError::new(ErrorCode::VersionMismatch, why));
    }
    log::debug!("client {client:?} connected");
    let reply = Reply::Hello(HelloReply {
        version: PROTOCOL_VERSION,
        server: format!("drsd {}", env!("CARGO_PKG_VERSION")),
        pid: std::process::id(),
    });
    ResponseFrame::result(id, reply)
}

#[cfg(test)]
#[path = "connection_props.rs"]
mod props;
