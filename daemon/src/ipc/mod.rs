//! Everything a client of the daemon needs: the wire protocol, the socket's
//! location, a client with start-on-demand. `drsctl` and the hooks use only this.

mod autostart;
mod client;
pub mod codec;
#[cfg(test)]
mod codec_props;
mod error;
pub mod paths;
pub mod protocol;

pub use autostart::{
    connect_or_start, Autostart, EXIT_ALREADY_RUNNING, IDLE_TIMEOUT_ENV, NO_AUTOSTART_ENV,
    READY_LINE,
};
pub use client::Client;
pub use error::{one_line, IpcError};
pub use protocol::*;
