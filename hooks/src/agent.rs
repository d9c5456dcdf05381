//! The git-lfs custom transfer agent: git-lfs's JSON lines on stdin and
//! stdout, each transfer relayed to the daemon as one request.
//!
//! The messages are typed ([`Event`] in, [`Answer`] out) after git-lfs's
//! custom transfer protocol: an oid that is not one is refused where it is
//! read, never sent on as text.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use drsd_proto::{
    connect_or_start, Autostart, Client, IpcError, LfsDownloadRequest, LfsUploadRequest, Oid,
    Progress,
};
use serde::{Deserialize, Serialize};

/// What git-lfs sends. Fields drs-hook does not use (the operation, the
/// remote, `action`) are left unread.
#[derive(Debug, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
enum Event {
    Init,
    Download { oid: Oid, size: u64 },
    Upload { oid: Oid, size: u64, path: PathBuf },
    Terminate,
}

/// What drs-hook answers a transfer with.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
enum Answer<'a> {
    Progress {
        oid: &'a str,
        #[serde(rename = "bytesSoFar")]
        so_far: u64,
        /// git-lfs wants both the total and the step since the last event.
        #[serde(rename = "bytesSinceLast")]
        since_last: u64,
    },
    Complete {
        oid: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        path: Option<PathBuf>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<AgentError>,
    },
}

/// The answer to `init`: `{}`, or the error that stops git-lfs.
#[derive(Debug, Default, Serialize)]
struct InitAnswer {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<AgentError>,
}

#[derive(Debug, Serialize)]
struct AgentError {
    code: u32,
    message: String,
}

/// Serves git-lfs until `terminate` (or the end of its input).
pub async fn run(socket: &Path) -> Result<()> {
    let repo = std::env::current_dir().context("the agent's working folder (the repo)")?;
    let mut client: Option<Client> = None;
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.context("reading git-lfs's request")?;
        let event = match serde_json::from_str::<Event>(&line) {
            Ok(event) => event,
            Err(e) => {
                refuse_unreadable(&line, &e)?;
                continue;
            }
        };
        match event {
            Event::Init => {
                let who = concat!("drs-hook agent ", env!("CARGO_PKG_VERSION"));
                match connect_or_start(socket, who, Some(&Autostart::from_env())).await {
                    Ok(c) => {
                        client = Some(c);
                        send(&InitAnswer::default())?;
                    }
                    Err(e) => send(&InitAnswer {
                        error: Some(AgentError {
                            code: 1,
                            message: e.to_string(),
                        }),
                    })?,
                }
            }
            Event::Terminate => break,
            transfer_event => {
                let Some(client) = client.as_mut() else {
                    bail!("git-lfs sent a transfer before init");
                };
                transfer(client, &repo, transfer_event).await?;
            }
        }
    }
    Ok(())
}

/// A line that is not one of git-lfs's events: a transfer with a malformed
/// oid fails alone (git-lfs names its object), anything else stops the agent.
fn refuse_unreadable(line: &str, error: &serde_json::Error) -> Result<()> {
    #[derive(Deserialize)]
    struct JustOid {
        oid: String,
    }
    let Ok(JustOid { oid }) = serde_json::from_str::<JustOid>(line) else {
        bail!("git-lfs sent a line drs-hook cannot read ({error}): {line:.200}");
    };
    send(&Answer::Complete {
        oid: &oid,
        path: None,
        error: Some(AgentError {
            code: 2,
            message: format!("drs-hook cannot take this transfer: {error}"),
        }),
    })
}

async fn transfer(client: &mut Client, repo: &Path, event: Event) -> Result<()> {
    let repo = repo.to_path_buf();
    let mut last = 0;
    let mut on_progress = |oid: &str, p: &Progress| {
        let _ = send(&Answer::Progress {
            oid,
            so_far: p.done,
            since_last: p.done.saturating_sub(last),
        });
        last = p.done;
    };
    let (oid, outcome): (Oid, Result<Option<PathBuf>, IpcError>) = match event {
        Event::Download { oid, size } => {
            let hex = oid.to_hex();
            let request = LfsDownloadRequest { repo, oid, size };
            let got = client.lfs_download(request, |p| on_progress(&hex, p)).await;
            (oid, got.map(|object| Some(object.path)))
        }
        Event::Upload { oid, size, path } => {
            let hex = oid.to_hex();
            let request = LfsUploadRequest {
                repo,
                oid,
                size,
                path,
            };
            let sent = client.lfs_upload(request, |p| on_progress(&hex, p)).await;
            (oid, sent.map(|_| None))
        }
        Event::Init | Event::Terminate => unreachable!("handled by run"),
    };
    let oid = oid.to_hex();
    let answer = match outcome {
        Ok(path) => Answer::Complete {
            oid: &oid,
            path,
            error: None,
        },
        Err(e) => Answer::Complete {
            oid: &oid,
            path: None,
            error: Some(AgentError {
                code: 2,
                message: e.to_string(),
            }),
        },
    };
    send(&answer)
}

/// One compact JSON line to git-lfs.
fn send(value: &impl Serialize) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, value)?;
    out.write_all(b"\n")?;
    out.flush().context("writing to git-lfs")
}
