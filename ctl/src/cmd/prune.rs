//! `drsctl prune [--dry-run] [--copies N] [REPO...]`: the daemon frees this
//! machine's copies of the objects nothing here needs, each only once it is
//! proven in N places other than this machine; a line per object says
//! where its copies were proven, or why it was kept.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use drsd_proto::{PruneReport, PruneRequest};

use crate::exit::Failure;
use crate::output::{bytes, escaped, progress_bar, Output};

/// What `drsctl prune` was asked.
pub struct Args {
    pub repos: Vec<PathBuf>,
    pub dry_run: bool,
    pub copies: u32,
}

pub async fn run(socket: &Path, args: Args, out: &Output) -> Result<(), Failure> {
    let cwd = std::env::current_dir().map_err(|e| anyhow!("the current folder: {e}"))?;
    let request = PruneRequest {
        cwd,
        repos: args.repos,
        dry_run: args.dry_run,
        copies: Some(args.copies),
    };
    let mut client = super::connect(socket).await?;
    let bar = progress_bar(out, "{spinner} {pos}/{len} {wide_msg}");
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let report = client
        .prune(request, |p| {
            bar.set_length(p.total.unwrap_or(0));
            bar.set_position(p.done);
            if let Some(line) = &p.message {
                bar.set_message(escaped(line).to_string());
            }
        })
        .await;
    bar.finish_and_clear();
    let report = report?;
    out.show(&report, || show(&report));
    Ok(())
}

fn show(report: &PruneReport) {
    for object in &report.objects {
        let line = PruneReport::line(object, &report.places, report.dry_run);
        println!("{}", escaped(&line));
    }
    let kept = report.objects.len() as u64 - report.freed;
    let verb = match report.dry_run {
        true => "would free",
        false => "freed",
    };
    println!(
        "{verb} {} object(s) ({}) proven in at least {} place(s) other than this machine; \
         kept {kept} not proven, and {} a repo needs here",
        report.freed,
        bytes(report.bytes),
        report.copies,
        report.needed,
    );
}
