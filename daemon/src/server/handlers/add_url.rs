//! `drsctl add-url`: reference remote objects from a repo by URL. The work
//! is the foreign-object service's (`ops::foreign`); this locates the repo,
//! registers it when first seen, and reports line by line.

use std::sync::Arc;

use super::{Progressor, Shared};
use crate::blocking;
use crate::git::Repo;
use crate::ops::foreign::{AddUrls, UrlLine};
use drsd_proto::{AddUrlEntry, AddUrlReport, AddUrlRequest, ErrorCode, Progress, Reply, WireError};

pub(crate) async fn handle(
    shared: &Arc<Shared>,
    request: AddUrlRequest,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    // `from` was refused before this (`Request::check_bounds`).
    let AddUrlRequest {
        cwd,
        entries,
        force,
        no_fetch,
        ..
    } = request;
    if !cwd.is_absolute() {
        return Err(invalid(format!(
            "{} is relative; send an absolute folder",
            cwd.display()
        )));
    }
    let (cwd, repo) = blocking(move || Repo::locate(&cwd).map(|repo| (cwd, repo)))
        .await
        .map_err(|e| invalid(e.to_string()))?;
    let Repo {
        top,
        common_dir: common,
        ..
    } = repo;
    shared.registrar.register_if_new(&top).await?;
    let request = AddUrls {
        cwd,
        top: top.clone(),
        common,
        lines: lines_of(entries),
        force,
        no_fetch,
    };
    let on_head = |done, total| {
        progress.send_now(Progress {
            stage: drsd_proto::Stage::Head,
            done,
            total: Some(total),
            message: None,
        })
    };
    let outcome = shared.foreign.add_urls(request, &on_head).await?;
    Ok(Reply::AddUrl(AddUrlReport {
        repo: top,
        added: outcome.added.into_iter().map(Into::into).collect(),
        failed: outcome.refused.into_iter().map(Into::into).collect(),
    }))
}

/// Each entry numbered by its line in the client's `--from` list, else by
/// its place in the request.
fn lines_of(entries: Vec<AddUrlEntry>) -> Vec<UrlLine> {
    let lines = entries.into_iter().enumerate();
    lines
        .map(|(i, e)| UrlLine {
            no: e.line.unwrap_or(i + 1),
            url: e.url,
            path: e.path,
            sha256: e.sha256,
            size: e.size,
            md5: e.md5,
        })
        .collect()
}

fn invalid(why: String) -> WireError {
    WireError::new(ErrorCode::InvalidArgument, why)
}
