//! The git hooks `drsctl init` installs: tell the daemon about the repo,
//! then run git-lfs's own hook with the same arguments and input; for
//! pre-push, only when the daemon did not already show every object sent.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, Result};
use drsd_proto::{connect_or_start, Autostart, PrePushRequest};

pub async fn run(socket: &Path, name: &str, args: &[String]) -> Result<ExitCode> {
    // Only pre-push gets input from git (the refs being pushed); git-lfs needs it too.
    let mut input = Vec::new();
    if name == "pre-push" {
        std::io::stdin()
            .read_to_end(&mut input)
            .context("reading the refs git pushes")?;
    }
    if !notify_daemon(socket).await {
        return Ok(ExitCode::from(1));
    }
    if name == "pre-push" {
        let remote = args.first().cloned().unwrap_or_else(|| "origin".into());
        match send_ahead(socket, remote, &input).await {
            Ahead::Refused => return Ok(ExitCode::from(1)),
            // git-lfs's own pre-push would offer the same objects (chosen
            // as it chooses them) to the agent one by one, only for the
            // daemon to find each in the object remote: time for nothing,
            // and a "(missing)" line for each one not in .git/lfs/objects
            // (a foreign object, a small one in the pool alone).
            Ahead::AllThere => return Ok(ExitCode::SUCCESS),
            Ahead::NotAsked => {}
        }
    }
    let mut child = Command::new("git")
        .args(["lfs", name])
        .args(args)
        .stdin(Stdio::piped())
        .spawn()
        .with_context(|| format!("running git lfs {name}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    stdin
        .write_all(&input)
        .context("handing git-lfs its input")?;
    drop(stdin);
    let status = child
        .wait()
        .with_context(|| format!("waiting for git lfs {name}"))?;
    Ok(ExitCode::from(status.code().unwrap_or(1) as u8))
}

/// Makes sure the daemon watches this repo (and so rescans it now). A hook
/// must not stop git when the daemon cannot be reached: it says so and goes
/// on. But a socket that is not to be trusted (another user's folder or
/// listener) stops the hook, failing: false.
async fn notify_daemon(socket: &Path) -> bool {
    let who = concat!("drs-hook ", env!("CARGO_PKG_VERSION"));
    let repo = match std::env::current_dir() {
        Ok(dir) => dir,
        Err(_) => return true,
    };
    let outcome = async {
        let mut client = connect_or_start(socket, who, Some(&Autostart::from_env())).await?;
        client.repos_add(repo).await
    };
    match outcome.await {
        Err(e) if e.is_untrusted() => {
            eprintln!("drs-hook: stopping: {e}");
            false
        }
        Err(e) => {
            eprintln!("drs-hook: the drsd daemon was not told about this repo: {e}");
            true
        }
        Ok(_) => true,
    }
}

/// What [`send_ahead`] found.
#[derive(Debug, PartialEq, Eq)]
enum Ahead {
    /// Every pushed object is shown to be in the object remote.
    AllThere,
    /// One is not: the push must stop.
    Refused,
    /// The daemon was not asked (no working folder): git-lfs's hook does
    /// the work alone.
    NotAsked,
}

/// Has the daemon send the pushed objects to the object remote, many at a
/// time. [`Ahead::AllThere`] only when every object is shown to be in the
/// object remote: one that is not (it exists nowhere, is not what its
/// pointer says, is still provisional, or could not be sent or checked now)
/// must not be published, since git-lfs lets missing objects through
/// (`lfs.allowincompletepush`). Each is named with its paths, the reason
/// and what to do.
async fn send_ahead(socket: &Path, remote: String, input: &[u8]) -> Ahead {
    let who = concat!("drs-hook ", env!("CARGO_PKG_VERSION"));
    let Ok(repo) = std::env::current_dir() else {
        return Ahead::NotAsked;
    };
    let request = PrePushRequest {
        repo,
        remote,
        updates: String::from_utf8_lossy(input).into_owned(),
    };
    let outcome = async {
        let mut client = connect_or_start(socket, who, Some(&Autostart::from_env())).await?;
        client.pre_push(request, |_| {}).await
    };
    match outcome.await {
        Ok(report) => {
            if report.copied > 0 {
                eprintln!(
                    "drs-hook: {} foreign object(s) copied server-side into the object remote",
                    report.copied
                );
            }
            if report.in_indexd > 0 || report.registered > 0 {
                eprintln!(
                    "drs-hook: Indexd: {} object(s) held there already (not sent), {} registered",
                    report.in_indexd, report.registered
                );
            }
            if report.trusted > 0 {
                eprintln!(
                    "drs-hook: {} object(s) taken as present on the word of {} (trust_claims), their bytes not shown",
                    report.trusted,
                    report.trusted_sources.join(", ")
                );
            }
            for stopped in report.refused.iter().chain(&report.failed) {
                eprintln!(
                    "drs-hook: refusing the push: {} (object {}): {}",
                    stopped.paths.join(", "),
                    stopped.oid,
                    stopped.why
                );
            }
            if !report.failed.is_empty() {
                eprintln!(
                    "drs-hook: nothing was pushed; once the failure above is fixed, push again"
                );
            }
            match report.refused.is_empty() && report.failed.is_empty() {
                true => Ahead::AllThere,
                false => Ahead::Refused,
            }
        }
        // git-lfs lets missing objects through (allowincompletepush): without
        // the daemon's check, the push could carry pointers nobody can fetch.
        Err(e) => {
            eprintln!(
                "drs-hook: refusing the push: the drsd daemon could not check its objects: {e}"
            );
            Ahead::Refused
        }
    }
}
