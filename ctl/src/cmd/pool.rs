use std::path::Path;

use drsd::ipc::{Reply, Request};

use crate::exit::{Failure, FAILED};
use crate::output::Output;

pub async fn verify(socket: &Path, out: &Output) -> Result<(), Failure> {
    let reply = super::call_with_spinner(socket, Request::PoolVerify, out).await;
    let Reply::Verify(report) = reply? else {
        return Err(anyhow::anyhow!("the daemon answered verify with something else").into());
    };
    out.show(&report, || {
        for bad in &report.bad {
            let tier = serde_json::to_value(bad.tier).ok();
            let tier = tier
                .as_ref()
                .and_then(|v| v.as_str())
                .unwrap_or("?")
                .to_string();
            println!("bad {} ({tier}): {}", bad.key, bad.problem);
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
