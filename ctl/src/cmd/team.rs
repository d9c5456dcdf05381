//! `drsctl team …`: a lab's team mode, the nodes sharing one pool.

use std::path::Path;

use crate::exit::Failure;
use crate::output::Output;

/// `drsctl team forget NODE`: the daemon removes the roots NODE published.
pub async fn forget(socket: &Path, node: String, out: &Output) -> Result<(), Failure> {
    let mut client = super::connect(socket).await?;
    let report = client.team_forget(node).await?;
    out.show(&report, || {
        println!(
            "forgot node {}: the roots of {} repo(s) ({} oids) no longer keep pool entries",
            report.node, report.repos, report.roots
        )
    });
    Ok(())
}
