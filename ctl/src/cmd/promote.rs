//! `drsctl promote`: provisional pointers become content pointers once their
//! objects are hashed; with `--wait`, waits for the hashes (a spinner on a
//! terminal, a line per change elsewhere) until nothing it waits for can
//! still change; with `--retry`, the prefetch jobs that failed for good are
//! queued again first.

use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::anyhow;
use drsd_proto::{ErrorCode, IpcError, JobState, PathWaiting, PromoteReport, PromoteRequest};
use indicatif::ProgressBar;

use crate::exit::{Failure, FAILED, UNREACHABLE};
use crate::output::{escaped, Output};

/// What `drsctl promote` was asked.
pub struct Args {
    pub paths: Vec<PathBuf>,
    pub all: bool,
    pub wait: bool,
    pub retry: bool,
}

pub async fn run(socket: &Path, args: Args, out: &Output) -> Result<(), Failure> {
    let cwd = std::env::current_dir().map_err(|e| anyhow!("the current folder: {e}"))?;
    let bar = match args.wait {
        true => {
            crate::output::progress_bar(out, "{spinner} waiting for {msg} hash(es) [{elapsed}]")
        }
        false => ProgressBar::hidden(),
    };
    // Not with --json, whose standard error stays empty.
    let mut changes = Changes::new(args.wait && !out.json && !std::io::stderr().is_terminal());
    let mut rewritten = Vec::new();
    let mut retry = args.retry;
    let mut first = true;
    let mut pause = Pause::default();
    let report = loop {
        let mut client = reconnect(socket, std::mem::take(&mut first)).await?;
        let mut report = client
            .promote(PromoteRequest {
                cwd: cwd.clone(),
                paths: args.paths.clone(),
                all: args.all,
                retry: std::mem::take(&mut retry),
            })
            .await?;
        changes.note(&report);
        rewritten.append(&mut report.rewritten);
        // Failed, held (size limit) or skipped (--no-fetch) objects will
        // not come by themselves: no waiting for them.
        let coming = report.waiting.iter().any(|w| !w.state.is_settled());
        if !args.wait || !coming {
            report.rewritten = std::mem::take(&mut rewritten);
            break report;
        }
        bar.set_message(report.waiting.len().to_string());
        bar.tick();
        tokio::time::sleep(pause.next(report.waiting.len())).await;
    };
    bar.finish_and_clear();
    show(&report, out);
    if report.waiting.is_empty() {
        return Ok(());
    }
    // A full pool disk is the one thing the user must act on: its code.
    let full = report.waiting.iter().any(|w| {
        w.state == JobState::Failed
            && w.error
                .as_deref()
                .is_some_and(|e| e.starts_with(ErrorCode::NoSpace.as_str()))
    });
    Err(Failure {
        code: FAILED,
        error: unfinished(&report.waiting),
        wire_code: full.then_some(ErrorCode::NoSpace),
        answered: true,
    })
}

/// The first connection may start a daemon; later ones, while waiting,
/// must not: a daemon gone meanwhile was stopped (`drsctl shutdown`), and
/// one started now would undo that.
async fn reconnect(socket: &Path, first: bool) -> Result<drsd_proto::Client, Failure> {
    if first {
        return Ok(super::connect(socket).await?);
    }
    match drsd_proto::connect_or_start(socket, super::CLIENT, None).await {
        Ok(client) => Ok(client),
        Err(IpcError::NotRunning { .. }) => Err(Failure {
            code: UNREACHABLE,
            error: anyhow!(
                "drsd stopped while promote --wait was waiting (drsctl shutdown?); \
                 no new daemon was started: run the command again to go on"
            ),
            wire_code: None,
            answered: false,
        }),
        Err(e) => Err(e.into()),
    }
}

/// The error for pointers left provisional, naming each object whose job
/// failed for good and why.
fn unfinished(waiting: &[PathWaiting]) -> anyhow::Error {
    let failed: Vec<&PathWaiting> = waiting
        .iter()
        .filter(|w| w.state == JobState::Failed)
        .collect();
    let mut message = format!("{} pointer(s) still provisional", waiting.len());
    if failed.is_empty() {
        message.push_str(": their objects are not hashed yet (drsctl status)");
        return anyhow!(message);
    }
    message.push_str(&format!(
        "; the prefetch of {} object(s) failed for good (once the cause is fixed, \
         drsctl promote --retry tries again):",
        failed.len()
    ));
    for w in failed {
        let why = w.error.as_deref().unwrap_or("no reason recorded");
        message.push_str(&format!("\n  {} ({}): {why}", w.path, w.url));
    }
    anyhow!(message)
}

/// Off a terminal, where no spinner shows, one line on standard error per
/// pointer whose state changed since the last look, and one per object
/// done: rewritten here, or gone from the waiting list (hashed, and its
/// staged pointer promoted by the daemon itself).
struct Changes {
    on: bool,
    seen: HashMap<String, JobState>,
}

/// How long `--wait` pauses between asks: 50 ms while objects keep
/// getting hashed (a batch of small ones is done in a second or two, and a
/// fixed half second was a third of that), doubling to half a second while
/// nothing moves (a large download: each ask costs the daemon a look at the
/// repo's entries).
#[derive(Debug)]
struct Pause {
    waiting: usize,
    now: Duration,
}

impl Default for Pause {
    fn default() -> Pause {
        Pause {
            waiting: usize::MAX,
            now: Pause::SHORT,
        }
    }
}

impl Pause {
    const SHORT: Duration = Duration::from_millis(50);
    const LONG: Duration = Duration::from_millis(500);

    fn next(&mut self, waiting: usize) -> Duration {
        self.now = match waiting < self.waiting {
            true => Pause::SHORT,
            false => (self.now * 2).min(Pause::LONG),
        };
        self.waiting = waiting;
        self.now
    }
}

impl Changes {
    fn new(on: bool) -> Changes {
        Changes {
            on,
            seen: HashMap::new(),
        }
    }

    fn note(&mut self, report: &PromoteReport) {
        if !self.on {
            return;
        }
        for path in &report.rewritten {
            self.seen.remove(path);
            eprintln!("drsctl: {}: promoted", escaped(path));
        }
        let still: HashSet<&str> = report.waiting.iter().map(|w| w.path.as_str()).collect();
        let mut done: Vec<String> = self
            .seen
            .keys()
            .filter(|p| !still.contains(p.as_str()))
            .cloned()
            .collect();
        done.sort();
        for path in done {
            self.seen.remove(&path);
            eprintln!(
                "drsctl: {}: hashed, promoted by drsd (staged)",
                escaped(&path)
            );
        }
        for w in &report.waiting {
            if self.seen.get(&w.path) != Some(&w.state) {
                let why = w.error.as_deref().map(|e| format!(": {}", escaped(e)));
                eprintln!(
                    "drsctl: {}: {}{}",
                    escaped(&w.path),
                    w.state,
                    why.unwrap_or_default()
                );
                self.seen.insert(w.path.clone(), w.state);
            }
        }
    }
}

fn show(report: &PromoteReport, out: &Output) {
    out.show(report, || {
        for path in &report.rewritten {
            println!("promoted {} (commit it)", escaped(path));
        }
        for w in &report.waiting {
            match (w.state, &w.error) {
                (JobState::Failed, why) => println!(
                    "failed   {} ({}): {}",
                    escaped(&w.path),
                    escaped(&w.url),
                    escaped(why.as_deref().unwrap_or("no reason recorded"))
                ),
                (state, why) => println!(
                    "waiting  {} ({} not hashed yet: {state}{})",
                    escaped(&w.path),
                    escaped(&w.url),
                    why.as_deref()
                        .map(|e| format!(", {}", escaped(e)))
                        .unwrap_or_default()
                ),
            }
        }
        for path in &report.changed {
            println!(
                "skipped  {}: it no longer holds the provisional pointer",
                escaped(path)
            );
        }
        if report.rewritten.is_empty() && report.waiting.is_empty() && report.changed.is_empty() {
            println!(
                "no provisional pointer left to promote in {}",
                report.repo.display()
            );
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_asks_often_while_objects_get_hashed_and_backs_off_while_none_do() {
        let mut pause = Pause::default();
        assert_eq!(pause.next(1000), Pause::SHORT, "the first pause is short");
        assert_eq!(pause.next(900), Pause::SHORT, "progress: short again");
        let idle: Vec<Duration> = (0..5).map(|_| pause.next(900)).collect();
        let ms: Vec<u128> = idle.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [100, 200, 400, 500, 500]);
        assert_eq!(pause.next(899), Pause::SHORT, "one more done: short");
    }
}
