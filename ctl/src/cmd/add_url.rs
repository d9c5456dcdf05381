//! `drsctl add-url URL [PATH]` and `drsctl add-url --from FILE`: the daemon
//! HEADs the objects and writes, tracks and stages the pointers; this side
//! shows progress and the outcome.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use drsd::ipc::{AddUrlEntry, AddUrlReport, Reply, Request};

use crate::exit::{Failure, FAILED};
use crate::output::Output;

/// What to add: one URL (with an optional path and known sha256) or a list.
pub struct AddUrlArgs {
    pub url: Option<String>,
    pub path: Option<PathBuf>,
    pub from: Option<PathBuf>,
    pub sha256: Option<String>,
    pub force: bool,
    pub no_fetch: bool,
}

/// More lines than this print a summary instead of one line per pointer.
const LIST_UP_TO: usize = 20;

pub async fn run(socket: &Path, args: AddUrlArgs, out: &Output) -> Result<(), Failure> {
    let cwd = std::env::current_dir().context("finding the current folder")?;
    let (entries, from) = match (args.url, args.from) {
        (Some(url), None) => {
            let entry = AddUrlEntry {
                url,
                path: args.path,
                sha256: args.sha256,
            };
            (vec![entry], None)
        }
        (None, Some(file)) => {
            let file = std::path::absolute(&file).context("making the --from path absolute")?;
            (Vec::new(), Some(file))
        }
        _ => return Err(anyhow!("give a URL or --from FILE").into()),
    };
    let request = Request::AddUrl {
        cwd,
        entries,
        from,
        force: args.force,
        no_fetch: args.no_fetch,
    };
    let report = call(socket, request, out).await?;
    show(&report, out);
    if report.failed.is_empty() {
        return Ok(());
    }
    let first = &report.failed[0];
    let error = match report.failed.len() {
        1 if report.added.is_empty() => anyhow!("{}", first.message),
        n => anyhow!(
            "{n} of {} URLs were not added (see above)",
            n + report.added.len()
        ),
    };
    Err(Failure {
        code: FAILED,
        error,
        wire_code: None,
        answered: out.json,
    })
}

async fn call(socket: &Path, request: Request, out: &Output) -> Result<AddUrlReport, Failure> {
    let mut client = super::connect(socket).await?;
    let bar = crate::output::progress_bar(out, "{bar:30} {pos}/{len} HEADs [{elapsed}] {msg}");
    let reply = client
        .call_with_progress(request, |p| {
            if let Some(total) = p.total {
                bar.set_length(total);
            }
            bar.set_position(p.done);
        })
        .await;
    bar.finish_and_clear();
    match reply? {
        Reply::AddUrl(report) => Ok(report),
        _ => Err(anyhow!("the daemon answered add-url with something else").into()),
    }
}

fn show(report: &AddUrlReport, out: &Output) {
    out.show(report, || {
        if report.added.len() <= LIST_UP_TO {
            for a in &report.added {
                let kind = if a.provisional {
                    "provisional oid, from the ETag"
                } else {
                    "content oid"
                };
                println!("added {} ({} bytes, {kind}: {})", a.path, a.size, a.oid);
            }
        } else {
            println!(
                "added {} pointers to {}",
                report.added.len(),
                report.repo.display()
            );
        }
    });
    if report.failed.len() > 1 || !report.added.is_empty() {
        for f in &report.failed {
            eprintln!("line {}: {}", f.line, f.message);
        }
    }
}
