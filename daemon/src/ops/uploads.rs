//! Multipart uploads a killed daemon left in the buckets: recorded in the
//! registry before their first part (`registry::uploads`), aborted at the
//! next start. Those the store cannot be asked about now stay recorded.

use std::sync::Arc;

use crate::registry::Registry;
use crate::remote::Remote;
use crate::stores::{abort_left_over, MultipartUpload};

/// The uploads an earlier daemon recorded in `registry` and never ended.
/// Called before any request is served (and before this daemon's remote
/// records in the registry), so none of this daemon's own is among them.
pub async fn left_over(registry: &Arc<Registry>) -> Vec<MultipartUpload> {
    let listing = registry.clone();
    match crate::blocking(move || listing.open_uploads()).await {
        Ok(left) => left,
        Err(e) => {
            log::warn!("listing left-over uploads: {e}");
            Vec::new()
        }
    }
}

/// Aborts the uploads `left` by an earlier daemon.
pub async fn abort(remote: Arc<Remote>, registry: Arc<Registry>, left: Vec<MultipartUpload>) {
    if left.is_empty() {
        return;
    }
    let client = match remote.s3() {
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
