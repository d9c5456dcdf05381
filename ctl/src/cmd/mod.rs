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

use std::path::Path;

use drsd::ipc::{connect_or_start, Autostart, Client, IpcError};

pub const CLIENT: &str = concat!("drsctl ", env!("CARGO_PKG_VERSION"));

pub async fn connect(socket: &Path) -> Result<Client, IpcError> {
    connect_or_start(socket, CLIENT, Some(&Autostart::from_env())).await
}
