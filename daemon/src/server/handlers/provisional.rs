//! `provisional`: the repo's pointers that still carry a provisional oid
//! (from an ETag), and where each object stands: its prefetch job's state,
//! or `hashed` once only `drsctl promote` is missing.

use std::path::PathBuf;

use super::{internal, Shared};
use crate::ipc::{ErrorCode, JobState, PathWaiting, ProvisionalReport, Reply, WireError};
use crate::lfs::scan::toplevel;
use crate::registry::{Entry, Registry};

pub(super) async fn handle(shared: &Shared, cwd: PathBuf) -> Result<Reply, WireError> {
    let registry = shared.registry.clone();
    tokio::task::spawn_blocking(move || {
        let top =
            toplevel(&cwd).map_err(|e| crate::server::wire_error::wire_error(ErrorCode::InvalidArgument, &e))?;
        let mut pointers = Vec::new();
        for e in registry.for_repo(&top).map_err(internal)? {
            if is_provisional(&e) {
                pointers.push(standing(&registry, &e)?);
            }
        }
        Ok(Reply::Provisional(ProvisionalReport {
            repo: top,
            pointers,
        }))
    })
    .await
    .map_err(internal)?
}

/// The pointer at the entry's path names its object by the ETag.
fn is_provisional(e: &Entry) -> bool {
    e.oid == e.object.provisional_oid && e.object.content_oid.as_deref() != Some(e.oid.as_str())
}

/// Where a provisional pointer's object stands.
pub(super) fn standing(registry: &Registry, e: &Entry) -> Result<PathWaiting, WireError> {
    let o = &e.object;
    let (state, error) = match &o.content_oid {
        Some(_) => (JobState::Hashed, None),
        None => registry
            .job_state(o.url.expose(), &o.etag, o.size)
            .map_err(internal)?
            .unwrap_or((JobState::Queued, None)),
    };
    Ok(PathWaiting {
        path: e.path.clone(),
        url: o.url.to_string(),
        state,
        error,
    })
}
