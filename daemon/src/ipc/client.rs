//! A connection to the daemon: handshake on connect, then one request at a time.

use std::path::{Path, PathBuf};

use futures_util::{SinkExt, StreamExt};
use interprocess::local_socket::tokio::{prelude::*, Stream};
use interprocess::local_socket::{GenericFilePath, ToFsName};
use tokio_util::codec::Framed;

use super::codec::{JsonLines, Line};
use super::protocol::*;
use super::IpcError;

pub struct Client {
    io: Framed<Stream, JsonLines>,
    socket: PathBuf,
    next_id: u64,
    server: String,
    pid: u32,
}

impl Client {
    /// Connects to the daemon on `socket` and says hello; `client` names the
    /// caller (e.g. `drsctl 0.1.0`) in the daemon's log.
    pub async fn connect(socket: &Path, client: &str) -> Result<Client, IpcError> {
        let stream = connect_stream(socket).await?;
        let mut me = Client {
            io: Framed::new(stream, JsonLines::new(MAX_RESPONSE_LINE)),
            socket: socket.to_path_buf(),
            next_id: 1,
            server: String::new(),
            pid: 0,
        };
        let hello = Request::Hello {
            version: PROTOCOL_VERSION,
            client: client.to_string(),
        };
        match me.call(hello).await {
            Ok(Reply::Hello { server, pid, .. }) => (me.server, me.pid) = (server, pid),
            Ok(other) => return Err(me.unexpected(&other)),
            // A daemon stopping (idle, or told to) may have taken the
            // connection without serving it: as good as none running.
            Err(IpcError::Closed { socket }) => {
                return Err(IpcError::NotRunning {
                    socket,
                    source: std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "it closed the connection before the handshake (stopping)",
                    ),
                })
            }
            Err(e) => return Err(e),
        }
        Ok(me)
    }

    /// The daemon's name and version, from the handshake.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The daemon's process id, from the handshake.
    pub fn server_pid(&self) -> u32 {
        self.pid
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Sends `request` and waits for its result, ignoring progress.
    pub async fn call(&mut self, request: Request) -> Result<Reply, IpcError> {
        self.call_with_progress(request, |_| {}).await
    }

    /// Sends `request`, hands every progress event to `on_progress`, returns the result.
    pub async fn call_with_progress(
        &mut self,
        request: Request,
        mut on_progress: impl FnMut(&Progress),
    ) -> Result<Reply, IpcError> {
        let id = self.next_id;
        self.next_id += 1;
        let frame = RequestFrame { id, request };
        if let Err(e) = self.io.send(&frame).await {
            // The daemon may have answered and closed before reading us (a
            // refused peer): its answer is still there to read.
            return match self.read_frame().await {
                Ok(ResponseFrame {
                    body: Body::Error { error },
                    ..
                }) => Err(IpcError::Daemon(error)),
                _ => Err(IpcError::io("write to", &self.socket, e)),
            };
        }
        loop {
            let response = self.read_frame().await?;
            if response.id.is_some() && response.id != Some(id) {
                continue; // an answer to an abandoned request
            }
            match response.body {
                Body::Progress { progress } => on_progress(&progress),
                Body::Result { result } => return Ok(result),
                Body::Error { error } => return Err(IpcError::Daemon(error)),
            }
        }
    }

    async fn read_frame(&mut self) -> Result<ResponseFrame, IpcError> {
        let line = match self.io.next().await {
            None => {
                return Err(IpcError::Closed {
                    socket: self.socket.clone(),
                })
            }
            Some(Err(e)) => return Err(IpcError::io("read from", &self.socket, e)),
            Some(Ok(line)) => line,
        };
        let text = match line {
            Line::Text(text) => text,
            Line::TooLong => return Err(self.protocol("a line over the length limit".into())),
            Line::NotText => return Err(self.protocol("a line that is not UTF-8".into())),
        };
        serde_json::from_str(&text).map_err(|e| self.protocol(format!("{e}")))
    }

    fn protocol(&self, why: String) -> IpcError {
        IpcError::Protocol {
            socket: self.socket.clone(),
            why,
        }
    }

    fn unexpected(&self, reply: &Reply) -> IpcError {
        self.protocol(format!("an unexpected reply {reply:?}"))
    }
}

/// Opens the socket; a missing or refusing socket is [`IpcError::NotRunning`].
pub(crate) async fn connect_stream(socket: &Path) -> Result<Stream, IpcError> {
    let name = socket
        .to_fs_name::<GenericFilePath>()
        .map_err(|e| IpcError::io("use as a socket name", socket, e))?;
    Stream::connect(name)
        .await
        .map_err(|source| IpcError::NotRunning {
            socket: socket.to_path_buf(),
            source,
        })
}
