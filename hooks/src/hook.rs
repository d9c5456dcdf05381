//! The git hooks `drsctl init` installs: tell the daemon about the repo,
//! then run git-lfs's own hook with the same arguments and input.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, Result};
use drsd::ipc::{connect_or_start, Autostart, Request};

pub async fn run(socket: &Path, name: &str, args: &[String]) -> Result<ExitCode> {
    // Only pre-push gets input from git (the refs being pushed); git-lfs needs it too.
    let mut input = Vec::new();
    if name == "pre-push" {
        std::io::stdin()
            .read_to_end(&mut input)
            .context("reading the refs git pushes")?;
    }
    notify_daemon(socket).await;
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
/// must not stop git when the daemon cannot be reached: it says so and goes on.
async fn notify_daemon(socket: &Path) {
    let who = concat!("drs-hook ", env!("CARGO_PKG_VERSION"));
    let repo = match std::env::current_dir() {
        Ok(dir) => dir,
        Err(_) => return,
    };
    let outcome = async {
        let mut client = connect_or_start(socket, who, Some(&Autostart::from_env())).await?;
        client.call(Request::ReposAdd { path: repo }).await
    };
    if let Err(e) = outcome.await {
        eprintln!("drs-hook: the drsd daemon was not told about this repo: {e}");
    }
}
