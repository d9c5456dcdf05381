//! `drsctl service install|uninstall`: the systemd user unit or launchd
//! agent from `packaging/`, with the drsd path filled in, written for the
//! current user, and the man pages of drsctl and drsd beside the user's
//! other ones.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use clap::{Subcommand, ValueEnum};

use crate::exit::Failure;
use crate::output::Output;

const UNIT: &str = include_str!("../../packaging/drsd.service");
const PLIST: &str = include_str!("../../packaging/drsd.plist");

#[derive(Subcommand)]
pub enum ServiceCommand {
    /// Write the unit (Linux) or agent (macOS) for the current user, and
    /// the man pages of drsctl and drsd
    Install(Install),
    /// Remove what install wrote (stop the service first)
    Uninstall(Target),
}

/// Which service file: the kind and its folder.
#[derive(clap::Args)]
pub struct Target {
    /// Which service manager [default: launchd on macOS, systemd elsewhere]
    #[arg(long, value_enum)]
    kind: Option<Kind>,
    /// Folder to write to [default: ~/.config/systemd/user or ~/Library/LaunchAgents]
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Where the man pages are [default: $XDG_DATA_HOME/man/man1]
    #[arg(long, value_name = "DIR")]
    man_dir: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct Install {
    #[command(flatten)]
    target: Target,
    /// The drsd binary the service runs [default: drsd next to drsctl, else on PATH]
    #[arg(long, value_name = "PATH")]
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
    /// The man pages written or removed.
    man_pages: Vec<PathBuf>,
    /// Why drsd's own pages are missing, when they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    man_warning: Option<String>,
}

pub fn run(command: ServiceCommand, out: &Output) -> Result<(), Failure> {
    let done = match command {
        ServiceCommand::Install(install) => self::install(&install)?,
        ServiceCommand::Uninstall(target) => uninstall(&target)?,
    };
    out.show(&done, || {
        println!("{} {}", done.action, done.path.display());
        if let Some(dir) = done.man_pages.first().and_then(|p| p.parent()) {
            let n = done.man_pages.len();
            println!("{} {n} man pages in {}", done.action, dir.display());
        }
        if let Some(why) = &done.man_warning {
            println!("warning: {why}");
        }
        println!("next: {}", done.next);
    });
    Ok(())
}

fn install(install: &Install) -> anyhow::Result<Done> {
    let target = &install.target;
    let kind = target.kind.unwrap_or_else(default_kind);
    let path = file_path(kind, target.dir.as_deref())?;
    let drsd = match &install.drsd {
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
    let man_dir = man_dir(target.man_dir.as_deref())?;
    let mut man_pages = crate::docs::write_man_pages(&man_dir)?;
    let man_warning = match drsd_man_pages(&drsd, &man_dir) {
        Ok(mut pages) => {
            man_pages.append(&mut pages);
            None
        }
        Err(why) => Some(format!("drsd's man pages were not written: {why:#}")),
    };
    Ok(Done {
        kind,
        path,
        action: "wrote",
        next,
        man_pages,
        man_warning,
    })
}

/// `$XDG_DATA_HOME/man/man1` (where man finds a user's pages, next to
/// `~/.local/bin` on PATH), unless chosen.
fn man_dir(chosen: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = chosen {
        return Ok(dir.to_path_buf());
    }
    let base =
        directories::BaseDirs::new().ok_or_else(|| anyhow!("no home folder; pass --man-dir"))?;
    Ok(base.data_dir().join("man").join("man1"))
}

/// drsd writes its own pages (drsctl cannot see drsd's command line).
fn drsd_man_pages(drsd: &Path, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = std::process::Command::new(drsd)
        .arg("man")
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running {}", drsd.display()))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        bail!("{} man: {}", drsd.display(), why.trim());
    }
    ours(dir, "drsd")
}

/// The pages of `program` in `dir`: `program.1` and `program-*.1`.
fn ours(dir: &Path, program: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n == format!("{program}.1")
                    || (n.starts_with(&format!("{program}-")) && n.ends_with(".1"))
            })
        })
        .collect();
    pages.sort();
    Ok(pages)
}

/// Removes the pages install wrote; a folder that is gone has none.
fn remove_man_pages(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut pages = ours(dir, "drsctl")?;
    pages.append(&mut ours(dir, "drsd")?);
    for page in &pages {
        std::fs::remove_file(page).with_context(|| format!("removing {}", page.display()))?;
    }
    Ok(pages)
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
    let man_pages = remove_man_pages(&man_dir(target.man_dir.as_deref())?)?;
    Ok(Done {
        kind,
        path,
        action: "removed",
        next,
        man_pages,
        man_warning: None,
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
            Ok(fill_in(UNIT, "#", &[("@DRSD@", drsd)]))
        }
        Kind::Launchd => {
            let home = directories::BaseDirs::new().ok_or_else(|| anyhow!("no home folder"))?;
            let log = home.home_dir().join("Library/Logs/drsd.log");
            let log = log
                .to_str()
                .ok_or_else(|| anyhow!("{} is not UTF-8", log.display()))?;
            let values = [("@DRSD@", xml_escape(drsd)), ("@LOG@", xml_escape(log))];
            let values = values.each_ref().map(|(k, v)| (*k, v.as_str()));
            Ok(fill_in(PLIST, "<!--", &values))
        }
    }
}

/// `template` with each placeholder replaced outside comments (`#` lines
/// in a unit, `<!-- ... -->` in a plist): a comment naming `@DRSD@` to
/// explain the template stays as written.
fn fill_in(template: &str, comment: &str, values: &[(&str, &str)]) -> String {
    let mut text = String::with_capacity(template.len());
    let mut in_xml_comment = false;
    for line in template.split_inclusive('\n') {
        let starts = line.trim_start().starts_with(comment);
        let commented = starts || in_xml_comment;
        if comment == "<!--" {
            in_xml_comment = (starts || in_xml_comment) && !line.contains("-->");
        }
        if commented {
            text.push_str(line);
            continue;
        }
        let mut line = line.to_string();
        for (key, value) in values {
            line = line.replace(key, value);
        }
        text.push_str(&line);
    }
    text
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn the_units_comment_keeps_its_placeholder_and_the_real_lines_get_the_path() {
        let unit = super::render(super::Kind::Systemd, Path::new("/opt/bin/drsd")).unwrap();
        assert!(unit.contains("ExecStart=/opt/bin/drsd serve"), "{unit}");
        let comments: Vec<&str> = unit.lines().filter(|l| l.starts_with('#')).collect();
        assert!(
            comments.iter().any(|l| l.contains("@DRSD@")),
            "{comments:?}"
        );
        assert!(!comments.iter().any(|l| l.contains("/opt/bin/drsd")));
    }

    #[test]
    fn the_plists_comment_keeps_its_placeholders() {
        let plist = super::render(super::Kind::Launchd, Path::new("/opt/bin/drsd")).unwrap();
        assert!(plist.contains("<string>/opt/bin/drsd</string>"), "{plist}");
        assert!(plist.contains("with @DRSD@ and @LOG@ filled in"), "{plist}");
        assert!(!plist.contains("<string>@LOG@</string>"), "{plist}");
    }
}
