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
        .map(|r| escaped(&r.path.display().to_string()).len())
        .max()
        .unwrap_or(4)
        .max(4);
    let now = unix_now();
    println!(
        "  {:<width$}  {:<8}  {:>10}  {:>8}  {:>7}  {:>7}  {:>6}",
        "path", "state", "last scan", "pointers", "in repo", "in pool", "absent"
    );
    for r in repos {
        let path = escaped(&r.path.display().to_string()).into_owned();
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
            println!("  {:<width$}  ^ {}", "", escaped(problem));
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

/// `text` as it may reach a terminal: every control character (C0, DEL,
/// C1) and every bidirectional formatting character shown as its escape
/// (`\u{1b}`, `\n`), never sent. For what another party wrote: a team's
/// node names and hosts, URLs, error texts from a database every member of
/// the lab may write, which could otherwise clear the screen, retitle the
/// window or forge a line.
pub fn escaped(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match unsafe_char(c) {
            true => out.extend(c.escape_default()),
            false => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A character that changes what the terminal shows rather than being shown.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// [`escaped`], but line breaks kept: for a message of several lines.
pub fn escaped_lines(text: &str) -> String {
    text.split('\n')
        .map(|line| escaped(line).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_read_like_people_write_them() {
        assert_eq!(super::bytes(0), "0 B");
        assert_eq!(super::bytes(1536), "1.5 KiB");
        assert_eq!(super::bytes(3 << 30), "3.0 GiB");
    }

    #[test]
    fn control_and_bidi_characters_are_shown_escaped_and_the_rest_as_written() {
        let planted = "n\u{1b}]0;owned\u{7}\u{1b}[2J\rx\u{9b}1m\u{202e}gpj.exe";
        let shown = super::escaped(planted);
        assert!(
            !shown.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{shown:?}"
        );
        assert_eq!(
            shown,
            "n\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\rx\\u{9b}1m\\u{202e}gpj.exe"
        );
        assert!(matches!(
            super::escaped("alice@login1 é 名前"),
            std::borrow::Cow::Borrowed("alice@login1 é 名前")
        ));
        assert_eq!(super::escaped_lines("a\u{1b}\nb"), "a\\u{1b}\nb");
    }
}
