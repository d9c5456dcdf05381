//! `drsctl service install|uninstall`: the systemd user unit or launchd
//! agent from `packaging/`, with the drsd path filled in, written for the
//! current user.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use clap::{Subcommand, ValueEnum};

use crate::exit::Failure;
use crate::output::Output;

const UNIT: &str = include_str!("../../packaging/drsd.service");
const PLIST: &str = include_str!("../../packaging/drsd.plist");

#[derive(Subcommand)]
pub enum ServiceCommand {
    /// Write the unit (Linux) or agent (macOS) for the current user
    Install(Target),
    /// Remove what install wrote (stop the service first)
    Uninstall(Target),
}

#[derive(clap::Args)]
pub struct Target {
    /// Which service manager [default: launchd on macOS, systemd elsewhere]
    #[arg(long, value_enum)]
    kind: Option<Kind>,
    /// Folder to write to [default: ~/.config/systemd/user or ~/Library/LaunchAgents]
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The drsd binary the service runs [default: drsd next to drsctl, else on PATH]
    #[arg(long)]
    drsd: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Systemd,
    Launchd,
}

#[derive(serde::Serialize)]
struct Done {
    kind: Kind,
    path: PathBuf,
    action: &'static str,
    next: String,
}

pub fn run(command: ServiceCommand, out: &Output) -> Result<(), Failure> {
    let done = match command {
        ServiceCommand::Install(target) => install(&target)?,
        ServiceCommand::Uninstall(target) => uninstall(&target)?,
    };
    out.show(&done, || {
        println!("{} {}", done.action, done.path.display());
        println!("next: {}", done.next);
    });
    Ok(())
}

fn install(target: &Target) -> anyhow::Result<Done> {
    let kind = target.kind.unwrap_or_else(default_kind);
    let path = file_path(kind, target.dir.as_deref())?;
    let drsd = match &target.drsd {
        Some(drsd) => std::path::absolute(drsd)?,
        None => find_drsd()?,
    };
    let text = render(kind, &drsd)?;
    let dir = path.parent().expect("a file path has a folder");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    let next = match kind {
        Kind::Systemd => {
            "systemctl --user daemon-reload && systemctl --user enable --now drsd.service".into()
        }
        Kind::Launchd => format!("launchctl bootstrap gui/$(id -u) {}", path.display()),
    };
    Ok(Done {
        kind,
        path,
        action: "wrote",
        next,
    })
}

fn uninstall(target: &Target) -> anyhow::Result<Done> {
    let kind = target.kind.unwrap_or_else(default_kind);
    let path = file_path(kind, target.dir.as_deref())?;
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{} is not installed", path.display())
        }
        Err(e) => return Err(anyhow!(e).context(format!("removing {}", path.display()))),
    }
    let next = match kind {
        Kind::Systemd => "systemctl --user daemon-reload".into(),
        Kind::Launchd => "nothing (if it was loaded: launchctl bootout gui/$(id -u)/drsd)".into(),
    };
    Ok(Done {
        kind,
        path,
        action: "removed",
        next,
    })
}

fn default_kind() -> Kind {
    if cfg!(target_os = "macos") {
        Kind::Launchd
    } else {
        Kind::Systemd
    }
}

fn file_path(kind: Kind, dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let name = match kind {
        Kind::Systemd => "drsd.service",
        Kind::Launchd => "drsd.plist",
    };
    if let Some(dir) = dir {
        return Ok(dir.join(name));
    }
    let home = directories::BaseDirs::new().ok_or_else(|| anyhow!("no home folder; pass --dir"))?;
    Ok(match kind {
        Kind::Systemd => home.config_dir().join("systemd").join("user").join(name),
        Kind::Launchd => home
            .home_dir()
            .join("Library")
            .join("LaunchAgents")
            .join(name),
    })
}

/// The template with the binary's path (and, for launchd, the log's) filled in.
fn render(kind: Kind, drsd: &Path) -> anyhow::Result<String> {
    let drsd = drsd
        .to_str()
        .ok_or_else(|| anyhow!("{} is not UTF-8", drsd.display()))?;
    match kind {
        Kind::Systemd => {
            if drsd
                .chars()
                .any(|c| c.is_whitespace() || c == '%' || c == '"' || c == '\\')
            {
                bail!("{drsd:?}: systemd needs a drsd path without spaces, quotes, backslashes or %; pass --drsd");
            }
            Ok(UNIT.replace("@DRSD@", drsd))
        }
        Kind::Launchd => {
            let home = directories::BaseDirs::new().ok_or_else(|| anyhow!("no home folder"))?;
            let log = home.home_dir().join("Library/Logs/drsd.log");
            let log = log
                .to_str()
                .ok_or_else(|| anyhow!("{} is not UTF-8", log.display()))?;
            Ok(PLIST
                .replace("@DRSD@", &xml_escape(drsd))
                .replace("@LOG@", &xml_escape(log)))
        }
    }
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `drsd` next to this drsctl, else the first on PATH.
fn find_drsd() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("finding drsctl's own path")?;
    let sibling = exe.parent().map(|dir| dir.join("drsd"));
    let on_path = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("drsd"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    sibling
        .into_iter()
        .chain(on_path)
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow!("no drsd binary next to drsctl or on PATH; pass --drsd"))
}
