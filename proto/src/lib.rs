//! drsd-proto: everything a client of the drsd daemon needs, and nothing of
//! the daemon itself. `drsctl` and the git hooks depend on this crate alone,
//! so they build without SQLite, TLS or S3 code.
//!
//! - [`Oid`]: the one object id, shared by the wire and the daemon.
//! - [`Pointer`]: the Git LFS pointer file, as git-lfs reads and writes it
//!   (the daemon scans repos for pointers; `drs-hook filter-process` cleans).
//! - [`Request`] (payload structs per method) and [`Reply`] (reports): the
//!   wire types; [`RequestFrame`]/[`ResponseFrame`] the lines they travel in.
//! - [`codec`]: JSON-lines framing with a line limit.
//! - [`cli`]: checks every command line's clap definition passes in a test.
//! - [`paths`]: where the per-user socket lives, and checks that it is ours.
//! - [`config_path`]: where the daemon's settings file is.
//! - [`Client`]: a typed client, one method per request; [`connect_or_start`]
//!   starts a daemon on demand.
//!
//! # The wire protocol: JSON lines over the daemon's local socket
//!
//! A client opens with [`Request::Hello`] carrying [`PROTOCOL_VERSION`]; the
//! daemon answers with its own version or a `version_mismatch` error. Every
//! request line carries a client-chosen `id`; the daemon answers with any
//! number of `progress` lines for that id, then exactly one `result` or
//! `error` line. Requests on one connection may be answered out of order.
//!
//! ```text
//! > {"id":1,"method":"hello","version":1,"client":"drsctl 0.1.0"}
//! < {"id":1,"kind":"result","result":{"type":"hello","version":1,"server":"drsd 0.1.0","pid":42}}
//! > {"id":2,"method":"pool_verify"}
//! < {"id":2,"kind":"progress","progress":{"stage":"verify","done":0,"total":12,"message":"..."}}
//! < {"id":2,"kind":"result","result":{"type":"verify","entries":12,"bad":[]}}
//! > {not json
//! < {"id":null,"kind":"error","error":{"code":"bad_request","message":"..."}}
//! ```

mod autostart;
pub mod cli;
mod client;
pub mod codec;
#[cfg(test)]
mod codec_props;
mod config;
mod error;
mod frame;
mod oid;
pub mod paths;
pub mod pointer;
mod reply;
mod request;
pub mod stamp;
mod team;

pub use autostart::{
    autostart_disabled, connect_or_start, Autostart, DRSD_BIN_ENV, EXIT_ALREADY_RUNNING,
    IDLE_TIMEOUT_ENV, NO_AUTOSTART_ENV, READY_LINE,
};
pub use client::Client;
pub use config::{
    config_path, default_config_path, ConfigReport, ConfigRequest, SettingLine, SettingSource,
    CONFIG_ENV, SECRET_SHOWN,
};
pub use error::{one_line, ErrorCode, IpcError, WireError};
pub use frame::{Body, Progress, ResponseFrame, Stage};
pub use oid::{BadOid, Oid};
pub use pointer::{BadLine, Pointer, PointerError, MAX_POINTER_SIZE};
pub use reply::*;
pub use request::*;
pub use stamp::FileStamp;
pub use team::{
    RefusedEntry, TeamForgetReport, TeamForgetRequest, TeamJoinRequest, TeamLeaveRequest,
    TeamMigrateReport,
};

/// The longest response line a client reads (a status with thousands of repos
/// or a verify naming many bad entries is still far below it).
pub const MAX_RESPONSE_LINE: usize = 16 * 1024 * 1024;
