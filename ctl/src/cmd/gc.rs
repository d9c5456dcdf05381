use std::path::Path;

use drsd_proto::GcRequest;

use crate::exit::Failure;
use crate::output::{bytes, Output};

/// `drsctl gc [--dry-run] [--force] [--grace DURATION]`: the daemon sweeps
/// the pool; a dry run lists each entry that would go.
pub async fn run(
    socket: &Path,
    dry_run: bool,
    force: bool,
    grace: u64,
    out: &Output,
) -> Result<(), Failure> {
    let request = GcRequest {
        dry_run,
        force,
        grace_secs: Some(grace),
    };
    let mut client = super::connect(socket).await?;
    let bar = super::spinner(out);
    let report = client.gc(request, super::spinner_shows(&bar)).await;
    bar.finish_and_clear();
    let report = report?;
    out.show(&report, || {
        if report.dry_run {
            for entry in &report.removed {
                println!(
                    "would remove {} ({}, {})",
                    entry.key,
                    entry.tier,
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
        if report.waiting > 0 {
            println!(
                "kept {} unreferenced entries that a repo referenced (or that were stored) \
                 less than {} ago",
                report.waiting,
                show_duration(report.grace_secs)
            );
        }
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

/// A duration for `--grace`: a whole number with an optional unit, `s`
/// (the default), `m`, `h` or `d`; in seconds.
pub fn parse_grace(text: &str) -> Result<u64, BadDuration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = match unit.trim() {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        other => return Err(BadDuration::Unit(other.to_string())),
    };
    let number: u64 = number
        .parse()
        .map_err(|_| BadDuration::NotOne(text.to_string()))?;
    number
        .checked_mul(unit)
        .ok_or_else(|| BadDuration::TooLong(text.to_string()))
}

/// Why a text is not a `--grace` duration.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadDuration {
    #[error("unknown unit {0:?}: use s, m, h or d")]
    Unit(String),
    #[error("{0:?} is not a duration like 30s, 90m, 24h or 7d")]
    NotOne(String),
    #[error("{0:?} is too long")]
    TooLong(String),
}

/// Seconds as the largest whole unit that fits: `24h`, `90m`, `45s`.
fn show_duration(secs: u64) -> String {
    match secs {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_durations_parse_with_units_and_refuse_the_rest() {
        assert_eq!(parse_grace("0"), Ok(0));
        assert_eq!(parse_grace("45"), Ok(45));
        assert_eq!(parse_grace("30s"), Ok(30));
        assert_eq!(parse_grace("90m"), Ok(5400));
        assert_eq!(parse_grace("24h"), Ok(86_400));
        assert_eq!(parse_grace("7d"), Ok(604_800));
        for bad in ["", "h", "1w", "-1h", "1.5h", "99999999999999999999d"] {
            assert!(parse_grace(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(show_duration(86_400), "1d");
        assert_eq!(show_duration(5400), "90m");
        assert_eq!(show_duration(45), "45s");
    }
}
