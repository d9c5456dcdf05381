//! `drsctl promote`: provisional pointers become content pointers once their
//! objects are hashed; with `--wait`, waits for the hashes (progress bar).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::anyhow;
use drsd::ipc::{PromoteReport, Reply, Request};
use indicatif::ProgressBar;

use crate::exit::{Failure, FAILED};
use crate::output::Output;

pub async fn run(
    socket: &Path,
    paths: Vec<PathBuf>,
    all: bool,
    wait: bool,
    out: &Output,
) -> Result<(), Failure> {
    let cwd = std::env::current_dir().map_err(|e| anyhow!("the current folder: {e}"))?;
    let bar = match wait {
        true => {
            crate::output::progress_bar(out, "{spinner} waiting for {msg} hash(es) [{elapsed}]")
        }
        false => ProgressBar::hidden(),
    };
    let mut rewritten = Vec::new();
    let report = loop {
        let mut client = super::connect(socket).await?;
        let reply = client
            .call(Request::Promote {
                cwd: cwd.clone(),
                paths: paths.clone(),
                all,
            })
            .await?;
        let Reply::Promoted(mut report) = reply else {
            return Err(anyhow!("the daemon answered promote with something else").into());
        };
        rewritten.append(&mut report.rewritten);
        // Objects held back (size limit, --no-fetch) will not come: no waiting.
        let coming = report
            .waiting
            .iter()
            .any(|w| !matches!(w.state.as_str(), "held" | "skipped"));
        if !wait || !coming {
            report.rewritten = std::mem::take(&mut rewritten);
            break report;
        }
        bar.set_message(report.waiting.len().to_string());
        bar.tick();
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    bar.finish_and_clear();
    show(&report, out);
    if report.waiting.is_empty() {
        return Ok(());
    }
    Err(Failure {
        code: FAILED,
        error: anyhow!(
            "{} pointer(s) still provisional: their objects are not hashed yet (drsctl status)",
            report.waiting.len()
        ),
        wire_code: None,
        answered: true,
    })
}

fn show(report: &PromoteReport, out: &Output) {
    out.show(report, || {
        for path in &report.rewritten {
            println!("promoted {path} (commit it)");
        }
        for w in &report.waiting {
            println!(
                "waiting  {} ({} not hashed yet: {})",
                w.path, w.url, w.state
            );
        }
        for path in &report.changed {
            println!("skipped  {path}: it no longer holds the provisional pointer");
        }
        if report.rewritten.is_empty() && report.waiting.is_empty() && report.changed.is_empty() {
            println!("nothing to promote in {}", report.repo.display());
        }
    });
}
