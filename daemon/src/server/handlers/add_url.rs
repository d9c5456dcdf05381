//! `drsctl add-url`: reference remote objects from a repo by URL. The work
//! is the foreign-object service's (`ops::foreign`); this locates the repo,
//! registers it when first seen, and reports line by line.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Progressor, Shared};
use crate::blocking;
use crate::ipc::{AddUrlEntry, AddUrlReport, ErrorCode, Progress, Reply, WireError};
use crate::ops::foreign::{AddUrls, UrlLine};

pub(crate) async fn handle(
    shared: &Arc<Shared>,
    cwd: PathBuf,
    entries: Vec<AddUrlEntry>,
    force: bool,
    no_fetch: bool,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    if !cwd.is_absolute() {
        return Err(invalid(format!(
            "{} is relative; send an absolute folder",
            cwd.display()
        )));
    }
    let (cwd, RepoAt { top, common }) = blocking(move || locate(&cwd).map(|at| (cwd, at)))
        .await
        .map_err(invalid)?;
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
            stage: crate::ipc::Stage::Head,
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

/// The work tree containing the client's folder and its common git folder.
struct RepoAt {
    top: PathBuf,
    common: PathBuf,
}

/// Both with one git process (a single add-url runs a handful in all).
fn locate(cwd: &Path) -> Result<RepoAt, String> {
    let out = crate::lfs::scan::git(cwd)
        .args(["rev-parse", "--show-toplevel", "--git-common-dir"])
        .output()
        .map_err(|e| format!("running git in {}: {e}", cwd.display()))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "{} is not in a git work tree: {}",
            cwd.display(),
            why.trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let (top, common) = (
        lines.next().unwrap_or_default(),
        lines.next().unwrap_or_default(),
    );
    let top = Path::new(top)
        .canonicalize()
        .map_err(|e| format!("{top}: {e}"))?;
    // --git-common-dir is relative to the folder git ran in.
    Ok(RepoAt {
        top,
        common: cwd.join(common),
    })
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
        })
        .collect()
}

fn invalid(why: String) -> WireError {
    WireError::new(ErrorCode::InvalidArgument, why)
}
