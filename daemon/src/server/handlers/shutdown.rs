//! `shutdown`: a client asks the daemon to stop. It stops the way a
//! SIGTERM stops it, through the shared cancellation token, so requests in
//! flight finish first.

use super::Shared;
use drsd_proto::Reply;

/// Starts the stop: the accept loop ends, requests in flight drain.
pub(crate) fn handle(shared: &Shared) -> Reply {
    log::info!("shutdown requested by a client");
    shared.stop.cancel();
    Reply::Done
}
