//! One file per command; each connects (starting the daemon on demand),
//! sends one request and prints the reply.

pub mod add_url;
pub mod config;
pub mod fetch;
pub mod gc;
pub mod init;
pub mod manifest;
pub mod pool;
pub mod promote;
pub mod prune;
pub mod repos;
pub mod shutdown;
pub mod status;
pub mod team;
pub mod url_list;

use std::path::Path;

use drsd_proto::{connect_or_start, Autostart, Client, IpcError, Progress};
use indicatif::ProgressBar;

use crate::output::{progress_bar, Output};

pub const CLIENT: &str = concat!("drsctl ", env!("CARGO_PKG_VERSION"));

pub async fn connect(socket: &Path) -> Result<Client, IpcError> {
    connect_or_start(socket, CLIENT, Some(&Autostart::from_env())).await
}

/// A spinner on standard error showing the daemon's progress messages
/// while a request runs; [`spinner_shows`] feeds it.
pub fn spinner(out: &Output) -> ProgressBar {
    let bar = progress_bar(out, "{spinner} {msg} [{elapsed}]");
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// A progress handler that puts each message on `bar`.
pub fn spinner_shows(bar: &ProgressBar) -> impl FnMut(&Progress) + '_ {
    |p| {
        if let Some(message) = &p.message {
            bar.set_message(message.clone());
        }
    }
}
