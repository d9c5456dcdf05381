//! Tables for people, JSON for scripts.

use serde::Serialize;

use drsd_proto::{RepoReport, RepoState};

pub struct Output {
    pub json: bool,
}

impl Output {
    /// Prints `value` as JSON when `--json`, else runs `human`.
    pub fn show<T: Serialize>(&self, value: &T, human: impl FnOnce()) {
        if self.json {
            println!(
                "{}",
                serde_json::to_string_pretty(value).expect("replies serialize")
            );
        } else {
            human();
        }
    }
}

/// 1536 -> "1.5 KiB".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

pub fn duration(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m {}s", s / 60, s % 60),
        s if s < 86400 => format!("{}h {}m", s / 3600, (s % 3600) / 60),
        s => format!("{}d {}h", s / 86400, (s % 86400) / 3600),
    }
}

fn state(state: RepoState) -> &'static str {
    match state {
        RepoState::Pending => "pending",
        RepoState::Watching => "watching",
        RepoState::Polling => "polling",
        RepoState::Missing => "missing",
        RepoState::Error => "error",
    }
}

pub fn repo_table(repos: &[RepoReport]) {
    if repos.is_empty() {
        println!("  (no repos registered; add one with `drsctl repos add PATH`)");
        return;
    }
    let width = repos
        .iter()
        .map(|r| r.path.display().to_string().len())
        .max()
        .unwrap_or(4)
        .max(4);
    let now = unix_now();
    println!(
        "  {:<width$}  {:<8}  {:>10}  {:>8}  {:>7}  {:>7}  {:>6}",
        "path", "state", "last scan", "pointers", "in repo", "in pool", "absent"
    );
    for r in repos {
        let path = r.path.display().to_string();
        let state = state(r.state);
        match &r.scan {
            Some(s) => println!(
                "  {path:<width$}  {state:<8}  {:>10}  {:>8}  {:>7}  {:>7}  {:>6}",
                format!("{} ago", duration(now.saturating_sub(s.scanned_at))),
                s.pointers,
                s.in_repo,
                s.in_pool,
                s.absent
            ),
            None => println!(
                "  {path:<width$}  {state:<8}  {:>10}  {:>8}  {:>7}  {:>7}  {:>6}",
                "never", "-", "-", "-", "-"
            ),
        }
        if let Some(problem) = &r.problem {
            println!("  {:<width$}  ^ {problem}", "");
        }
    }
    println!("  {LEGEND}");
}

/// What the table's counts count: git-lfs objects of the LFS pointers in
/// HEAD, each in exactly one column.
const LEGEND: &str = "(pointers: LFS pointers in HEAD; in repo: their objects in \
.git/lfs/objects, a hard link shared with the pool included; in pool: only in the \
pool, checkout takes them from there; absent: in neither)";

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A progress bar on standard error with `template`; hidden for `--json`
/// (and indicatif draws nothing when standard error is not a terminal).
pub fn progress_bar(out: &Output, template: &str) -> indicatif::ProgressBar {
    let bar = if out.json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(0)
    };
    bar.set_style(indicatif::ProgressStyle::with_template(template).expect("valid template"));
    bar
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_read_like_people_write_them() {
        assert_eq!(super::bytes(0), "0 B");
        assert_eq!(super::bytes(1536), "1.5 KiB");
        assert_eq!(super::bytes(3 << 30), "3.0 GiB");
    }
}
