//! The git-lfs custom transfer agent: git-lfs's JSON lines on stdin and
//! stdout, each transfer relayed to the daemon as one request.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use drsd::ipc::{connect_or_start, Autostart, Client, Progress, Reply, Request};
use serde_json::{json, Value};

/// Serves git-lfs until `terminate` (or the end of its input).
pub async fn run(socket: &Path) -> Result<()> {
    let repo = std::env::current_dir().context("the agent's working folder (the repo)")?;
    let mut client: Option<Client> = None;
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.context("reading git-lfs's request")?;
        let event: Value = serde_json::from_str(&line)
            .with_context(|| format!("git-lfs sent a line that is not JSON: {line:.200}"))?;
        match event["event"].as_str() {
            Some("init") => {
                let who = concat!("drs-hook agent ", env!("CARGO_PKG_VERSION"));
                match connect_or_start(socket, who, Some(&Autostart::from_env())).await {
                    Ok(c) => {
                        client = Some(c);
                        send(&json!({}))?;
                    }
                    Err(e) => send(&json!({"error": {"code": 1, "message": e.to_string()}}))?,
                }
            }
            Some("download") | Some("upload") => {
                let Some(client) = client.as_mut() else {
                    bail!("git-lfs sent a transfer before init");
                };
                transfer(client, &repo, &event).await?;
            }
            Some("terminate") => break,
            other => bail!("git-lfs sent an unknown event {other:?}"),
        }
    }
    Ok(())
}

async fn transfer(client: &mut Client, repo: &Path, event: &Value) -> Result<()> {
    let oid = event["oid"].as_str().unwrap_or_default().to_string();
    let size = event["size"].as_u64().unwrap_or_default();
    let request = if event["event"] == "download" {
        Request::LfsDownload {
            repo: repo.to_path_buf(),
            oid: oid.clone(),
            size,
        }
    } else {
        Request::LfsUpload {
            repo: repo.to_path_buf(),
            oid: oid.clone(),
            size,
            path: PathBuf::from(event["path"].as_str().unwrap_or_default()),
        }
    };
    let mut last = 0;
    let outcome = client
        .call_with_progress(request, |p: &Progress| {
            // git-lfs wants both the total and the step since the last event.
            let _ = send(&json!({"event": "progress", "oid": oid, "bytesSoFar": p.done, "bytesSinceLast": p.done.saturating_sub(last)}));
            last = p.done;
        })
        .await;
    let answer = match outcome {
        Ok(Reply::LfsObject { path, .. }) => json!({"event": "complete", "oid": oid, "path": path}),
        Ok(_) => json!({"event": "complete", "oid": oid}),
        Err(e) => {
            json!({"event": "complete", "oid": oid, "error": {"code": 2, "message": e.to_string()}})
        }
    };
    send(&answer)
}

/// One compact JSON line to git-lfs.
fn send(value: &Value) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, value)?;
    out.write_all(b"\n")?;
    out.flush().context("writing to git-lfs")
}
