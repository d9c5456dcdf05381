//! `drsctl team …`: a lab's team mode, the nodes sharing one pool.

use std::path::Path;

use drsd_proto::TeamMigrateReport;

use crate::exit::Failure;
use crate::output::{escaped, Output};

/// `drsctl team forget NODE`: the daemon removes the roots NODE published.
pub async fn forget(socket: &Path, node: String, out: &Output) -> Result<(), Failure> {
    let mut client = super::connect(socket).await?;
    let report = client.team_forget(node).await?;
    out.show(&report, || {
        println!(
            "forgot node {}: the roots of {} repo(s) ({} oids) no longer keep pool entries{}",
            escaped(&report.node),
            report.repos,
            report.roots,
            match report.listed {
                true => "; no longer listed among the team's nodes",
                false => "",
            }
        )
    });
    Ok(())
}

/// `drsctl team join`: the daemon (in team mode) copies this machine's own
/// pool and registry into the team's. Exits 1 when an entry was refused.
pub async fn join(socket: &Path, out: &Output) -> Result<(), Failure> {
    let mut client = super::connect(socket).await?;
    let report = client.team_join().await?;
    migrated(&report, "joined the team", "into the team's pool", out)
}

/// `drsctl team leave`: the daemon copies back into this machine's own pool
/// and registry what its repos need. Exits 1 when an entry was refused.
pub async fn leave(socket: &Path, out: &Output) -> Result<(), Failure> {
    let mut client = super::connect(socket).await?;
    let report = client.team_leave().await?;
    migrated(
        &report,
        "ready to leave the team",
        "into this machine's pool",
        out,
    )
}

fn migrated(
    report: &TeamMigrateReport,
    done: &str,
    into: &str,
    out: &Output,
) -> Result<(), Failure> {
    out.show(report, || {
        println!(
            "{done}: {} pool entries copied {into} ({} bytes), {} there already; \
             {} record(s) of {} repo(s) copied",
            report.copied, report.bytes, report.present, report.records, report.repos
        );
        if report.absent > 0 {
            println!(
                "{} oid(s) the repos name are in neither pool (provisional, or never fetched)",
                report.absent
            );
        }
        for refused in &report.refused {
            println!(
                "refused {}: {}",
                escaped(&refused.key),
                escaped(&refused.why)
            );
        }
    });
    match report.refused.len() {
        0 => Ok(()),
        n => Err(Failure {
            code: crate::exit::FAILED,
            error: anyhow::anyhow!(
                "{n} pool entr{} not copied: their bytes do not match their name",
                if n == 1 { "y was" } else { "ies were" }
            ),
            wire_code: None,
            answered: true,
        }),
    }
}
