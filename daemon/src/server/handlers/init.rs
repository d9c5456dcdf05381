//! `drsctl init [--undo]`: set a repo up for drsd and register it, or back
//! (`ops::repos::Registrar`).

use super::Shared;
use crate::lfs::setup::{parse_authz, parse_indexd, RepoSettings};
use crate::remote::ObjectRemote;
use drsd_proto::{ErrorCode, Reply, RepoInitRequest, WireError};

pub(crate) async fn handle(shared: &Shared, request: RepoInitRequest) -> Result<Reply, WireError> {
    let RepoInitRequest {
        path,
        agent,
        remote,
        indexd,
        authz,
        undo,
        no_remote,
    } = request;
    if !path.is_absolute() || !agent.is_absolute() {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            format!(
                "send absolute paths (repo {}, agent {})",
                path.display(),
                agent.display()
            ),
        ));
    }
    if no_remote && remote.is_some() {
        return Err(WireError::new(
            ErrorCode::InvalidArgument,
            "give --remote or --no-remote, not both",
        ));
    }
    let mut settings = settings(remote, indexd, authz)?;
    settings.forget_remote = no_remote;
    let report = match undo {
        false => shared.registrar.set_up(path, agent, settings).await?,
        true => shared.registrar.take_down(path).await?,
    };
    Ok(Reply::Setup(report))
}

/// The settings asked for, checked: an object remote of an unknown kind or
/// malformed, a bad Indexd URL or authz list is refused before anything
/// changes. A folder remote is recorded as its `file://` URL.
fn settings(
    remote: Option<String>,
    indexd: Option<String>,
    authz: Option<String>,
) -> Result<RepoSettings, WireError> {
    let bad = |message: String| WireError::new(ErrorCode::InvalidArgument, message);
    let remote = match remote {
        Some(text) => Some(
            ObjectRemote::parse(&text)
                .map_err(|e| bad(format!("--remote: {e}")))?
                .url(),
        ),
        None => None,
    };
    let indexd = match indexd {
        Some(text) => Some(parse_indexd(&text).ok_or_else(|| {
            bad(format!(
                "--indexd {text:?}: give the Indexd's http(s) base URL without credentials, like https://data.example.org"
            ))
        })?),
        None => None,
    };
    let authz = match authz {
        Some(text) => parse_authz(&text).ok_or_else(|| {
            bad(format!(
                "--authz {text:?}: give resource paths like /programs/P/projects/Q, comma-separated"
            ))
        })?,
        None => Vec::new(),
    };
    Ok(RepoSettings {
        remote,
        indexd,
        authz,
        forget_remote: false,
    })
}
