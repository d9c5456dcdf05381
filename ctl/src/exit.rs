//! Exit codes (also in `drsctl --help`): 0 done, 1 failed or found a problem,
//! 2 bad usage (clap), 3 no daemon reachable, 4 protocol mismatch.

use std::process::ExitCode;

use drsd_proto::{ErrorCode, IpcError};

pub const FAILED: u8 = 1;
pub const USAGE: u8 = 2;
pub const UNREACHABLE: u8 = 3;
pub const PROTOCOL: u8 = 4;

/// An error with the exit code it ends drsctl with.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
    /// The daemon's `{code, message}` when it sent one.
    pub wire_code: Option<ErrorCode>,
    /// The command already printed its JSON answer (e.g. a verify report
    /// naming bad entries); only the exit code and the message remain.
    pub answered: bool,
}

impl Failure {
    pub fn other(error: anyhow::Error) -> Failure {
        Failure {
            code: FAILED,
            error,
            wire_code: None,
            answered: false,
        }
    }

    /// Prints the error: on standard error for people; with `--json` on
    /// standard output only, as `{"error": {"code", "message"}}` (or not at
    /// all when the command's JSON answer already tells it), so a script
    /// reads one document and standard error stays empty.
    pub fn report(self, json: bool) -> ExitCode {
        let message = drsd_proto::one_line(self.error.as_ref());
        if !json {
            // A message may quote what a server or the team's database
            // holds: its control characters are shown, not sent.
            eprintln!("drsctl: {}", crate::output::escaped_lines(&message));
        } else if !self.answered {
            let code = self
                .wire_code
                .map(|c| c.to_string())
                .unwrap_or_else(|| kind(self.code).into());
            let body = serde_json::json!({"error": {"code": code, "message": message}});
            println!("{body}");
        }
        ExitCode::from(self.code)
    }

    /// A usage error (clap's), exit 2; as JSON on standard output when the
    /// command line asked for `--json`.
    pub fn usage(error: clap::Error, json: bool) -> ExitCode {
        use clap::error::ErrorKind;
        let shown = matches!(
            error.kind(),
            ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
        if !json || shown {
            error.exit();
        }
        let text = error.to_string();
        let first = text.lines().next().unwrap_or("");
        let message = first.strip_prefix("error: ").unwrap_or(first);
        let body = serde_json::json!({"error": {"code": "usage", "message": message}});
        println!("{body}");
        ExitCode::from(USAGE)
    }
}

fn kind(code: u8) -> &'static str {
    match code {
        UNREACHABLE => "unreachable",
        PROTOCOL => "protocol",
        _ => "failed",
    }
}

impl From<IpcError> for Failure {
    fn from(e: IpcError) -> Failure {
        let (code, wire_code) = match &e {
            IpcError::NotRunning { .. }
            | IpcError::StartFailed { .. }
            | IpcError::SocketDir { .. }
            | IpcError::SocketFile { .. }
            | IpcError::PeerNotUs { .. }
            | IpcError::PeerUnknown { .. } => (UNREACHABLE, None),
            IpcError::Io { .. } | IpcError::Closed { .. } => (UNREACHABLE, None),
            IpcError::Protocol { .. } => (PROTOCOL, None),
            IpcError::Daemon(w) if w.code == ErrorCode::VersionMismatch => (PROTOCOL, Some(w.code)),
            IpcError::Daemon(w) => (FAILED, Some(w.code)),
        };
        Failure {
            code,
            error: e.into(),
            wire_code,
            answered: false,
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Failure {
        Failure::other(error)
    }
}
