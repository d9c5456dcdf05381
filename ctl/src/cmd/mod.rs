//! One file per command; each connects (starting the daemon on demand),
//! sends one request and prints the reply.

pub mod add_url;
pub mod gc;
pub mod init;
pub mod pool;
pub mod promote;
pub mod repos;
pub mod shutdown;
pub mod status;
pub mod url_list;

use std::path::Path;

use drsd::ipc::{connect_or_start, Autostart, Client, IpcError, Reply, Request};

use crate::output::{progress_bar, Output};

pub const CLIENT: &str = concat!("drsctl ", env!("CARGO_PKG_VERSION"));

pub async fn connect(socket: &Path) -> Result<Client, IpcError> {
    connect_or_start(socket, CLIENT, Some(&Autostart::from_env())).await
}

/// Connects, sends `request` and waits for its reply under a spinner that
/// shows the daemon's progress messages.
pub async fn call_with_spinner(
    socket: &Path,
    request: Request,
    out: &Output,
) -> Result<Reply, IpcError> {
    let mut client = connect(socket).await?;
    let bar = progress_bar(out, "{spinner} {msg} [{elapsed}]");
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let reply = client
        .call_with_progress(request, |p| {
            if let Some(message) = &p.message {
                bar.set_message(message.clone());
            }
        })
        .await;
    bar.finish_and_clear();
    reply
}
