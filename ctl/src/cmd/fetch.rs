//! `drsctl fetch`: queue the prefetch (download and hash) of the objects
//! behind provisional pointers: those added with `add-url --no-fetch`, or
//! whose prefetch failed for good and whose cause is fixed.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use drsd_proto::{FetchReport, FetchRequest};

use crate::exit::Failure;
use crate::output::Output;

pub async fn run(
    socket: &Path,
    paths: Vec<PathBuf>,
    all: bool,
    out: &Output,
) -> Result<(), Failure> {
    let cwd = std::env::current_dir().map_err(|e| anyhow!("the current folder: {e}"))?;
    let mut client = super::connect(socket).await?;
    let report = client.fetch(FetchRequest { cwd, paths, all }).await?;
    show(&report, out);
    Ok(())
}

fn show(report: &FetchReport, out: &Output) {
    out.show(report, || {
        for w in &report.fetching {
            println!("{:<8} {} ({})", w.state.to_string(), w.path, w.url);
        }
        for path in &report.hashed {
            println!("hashed   {path} (drsctl promote, then commit)");
        }
        if report.fetching.is_empty() && report.hashed.is_empty() {
            println!(
                "no provisional pointer to fetch in {}",
                report.repo.display()
            );
        } else if !report.fetching.is_empty() {
            println!("drsctl promote --wait waits for them and promotes");
        }
    });
}
