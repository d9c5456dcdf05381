use std::path::Path;

use crate::exit::{Failure, FAILED};
use crate::output::Output;

pub async fn verify(socket: &Path, out: &Output) -> Result<(), Failure> {
    let mut client = super::connect(socket).await?;
    let bar = super::spinner(out);
    let report = client.pool_verify(super::spinner_shows(&bar)).await;
    bar.finish_and_clear();
    let report = report?;
    out.show(&report, || {
        for bad in &report.bad {
            println!("bad {} ({}): {}", bad.key, bad.tier, bad.problem);
            match &bad.quarantined {
                Some(place) => println!("  quarantined: moved to {place}"),
                None => println!("  gone from the pool before it could be moved aside"),
            }
        }
        if report.bad.is_empty() {
            println!("all {} entries match their sha256", report.entries);
        }
    });
    if report.bad.is_empty() {
        return Ok(());
    }
    Err(Failure {
        code: FAILED,
        error: anyhow::anyhow!(
            "{} of {} pool entries are bad (moved aside: git gets them from the object remote)",
            report.bad.len(),
            report.entries
        ),
        wire_code: None,
        answered: true,
    })
}
