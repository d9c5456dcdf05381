//! Multipart uploads a killed daemon left in the buckets: recorded in the
//! registry before their first part (`registry::uploads`), aborted at the
//! next start. Those the store cannot be asked about now stay recorded.

use std::sync::Arc;

use crate::registry::Registry;
use crate::remote::{abort_left_over, record_uploads_in, shared_s3, MultipartUpload};

/// Has every multipart upload from now on recorded in `registry`, and
/// returns those an earlier daemon recorded and never ended. Called before
/// any request is served, so none of this daemon's own is among them.
pub(super) async fn start_recording(registry: &Arc<Registry>) -> Vec<MultipartUpload> {
    let listing = registry.clone();
    let left = tokio::task::spawn_blocking(move || listing.open_uploads()).await;
    record_uploads_in(registry.clone());
    match left {
        Ok(Ok(left)) => left,
        Ok(Err(e)) => {
            log::warn!("listing left-over uploads: {e}");
            Vec::new()
        }
        Err(e) => {
            log::warn!("listing left-over uploads: {e}");
            Vec::new()
        }
    }
}

/// Aborts the uploads `left` by an earlier daemon.
pub(super) async fn abort(registry: Arc<Registry>, left: Vec<MultipartUpload>) {
    if left.is_empty() {
        return;
    }
    let client = match shared_s3() {
        Ok(client) => client,
        Err(e) => {
            log::warn!(
                "{} multipart upload(s) left by an earlier daemon stay until the store can be reached: {e}",
                left.len()
            );
            return;
        }
    };
    let n = left.len();
    let done = abort_left_over(&client, registry.as_ref(), left).await;
    log::info!(
        "{n} multipart upload(s) left by an earlier daemon: {} aborted, {} kept for the next start",
        done.aborted,
        done.kept
    );
}
