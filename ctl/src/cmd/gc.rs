use std::path::Path;

use drsd::ipc::{Reply, Request};

use crate::exit::Failure;
use crate::output::{bytes, Output};

/// `drsctl gc [--dry-run]`: the daemon sweeps the pool; a dry run lists
/// each entry that would go.
pub async fn run(socket: &Path, dry_run: bool, out: &Output) -> Result<(), Failure> {
    let reply = super::call_with_spinner(socket, Request::Gc { dry_run }, out).await;
    let Reply::Gc(report) = reply? else {
        return Err(anyhow::anyhow!("the daemon answered gc with something else").into());
    };
    out.show(&report, || {
        if report.dry_run {
            for entry in &report.removed {
                let tier = serde_json::to_value(entry.tier).unwrap_or_default();
                let tier = tier.as_str().unwrap_or("?");
                println!(
                    "would remove {} ({tier}, {})",
                    entry.key,
                    bytes(entry.bytes)
                );
            }
        }
        let verb = if report.dry_run {
            "would remove"
        } else {
            "removed"
        };
        println!(
            "{verb} {} pool entries ({}) that none of the {} registered repos references; \
             kept {}{}",
            report.removed.len(),
            bytes(report.bytes),
            report.repos,
            report.kept,
            match report.recent {
                0 => String::new(),
                n => format!(", and {n} stored while it ran"),
            }
        );
        if report.compacted > 0 {
            println!(
                "the kv database gave {} back to the file system",
                bytes(report.compacted)
            );
        }
        if report.partials.files > 0 {
            println!(
                "{} partial download(s) no job will resume, {}: {}",
                report.partials.files,
                bytes(report.partials.bytes),
                if report.dry_run {
                    "would be removed"
                } else {
                    "removed"
                }
            );
        }
    });
    Ok(())
}
