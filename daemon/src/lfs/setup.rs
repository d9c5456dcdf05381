//! Setting a repo up for drsd (`drsctl init`) and back (`drsctl init --undo`):
//! git-lfs's filters, our standalone transfer agent, and hooks that tell the
//! daemon and then run git-lfs's own. Every key goes in the repo's git config:
//! git-lfs ignores transfer-agent keys in `.lfsconfig` ("unsafe keys").

use std::fs;
use std::path::{Path, PathBuf};

use crate::git::{git, GitError, Repo};
use crate::safe_write::{self, Mode};
use crate::IoError;

/// The name git-lfs knows our agent by.
pub const AGENT: &str = "drs";
/// The hooks git-lfs installs; ours replace them and chain to them.
pub const HOOKS: [&str; 4] = ["pre-push", "post-checkout", "post-commit", "post-merge"];
/// Marks a hook file as ours, so re-running init and undo recognise it.
const MARK: &str = "# drsd hook: installed by `drsctl init`";
/// The committed place a fresh clone learns the object remote from: a git
/// attribute of `.gitattributes` itself, in that file (`.gitattributes
/// drs-remote=s3://bucket/prefix`, or `drs-remote=file:///shared/objects`). Not `.lfsconfig`: git-lfs 3.3 warns
/// about any key it does not know there, on every command.
pub const REMOTE_ATTR: &str = "drs-remote";
/// The Gen3 Indexd that pushes register objects with, recorded beside the
/// object remote so every clone knows it (`drs-indexd=https://host`).
pub const INDEXD_ATTR: &str = "drs-indexd";
/// The Indexd `authz` resources new records get, comma-separated
/// (`drs-authz=/programs/P/projects/Q`).
pub const AUTHZ_ATTR: &str = "drs-authz";

/// What a repo records in its top `.gitattributes` for every clone: where
/// its objects go, and where they are registered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepoSettings {
    /// The object remote, `s3://bucket/prefix` or `file:///folder`.
    pub remote: Option<String>,
    /// Remove the recorded object remote (`drsctl init --no-remote`).
    pub forget_remote: bool,
    /// The Gen3 Indexd's base URL.
    pub indexd: Option<url::Url>,
    /// Indexd `authz` resources for new records.
    pub authz: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Repo(#[from] GitError),
    #[error("git {args} in {repo}: {why}")]
    Git {
        repo: PathBuf,
        args: String,
        why: String,
    },
    // Path first, unlike `IoError`'s own text: init's messages read so.
    #[error("{}: {}: {}", .0.path.display(), .0.op, .0.source)]
    Io(#[from] IoError),
    #[error(
        "object remote {url:?} cannot be recorded: it must be one word, like s3://bucket/prefix"
    )]
    BadRemote { url: String },
    #[error("Indexd {url:?} cannot be recorded: it must be an http(s) URL without credentials, like https://data.example.org")]
    BadIndexd { url: String },
    #[error("Indexd authz {authz:?} cannot be recorded: give resource paths like /programs/P/projects/Q, comma-separated, without blanks")]
    BadAuthz { authz: String },
    #[error("an Indexd record needs an s3:// object remote: others cannot read the folder {remote}; record an s3:// remote, or no Indexd")]
    IndexdNeedsS3 { remote: String },
    #[error("{path} is a hook of your own, not git-lfs's: move it away, or call `drs-hook hook {name}` from it, then run init again")]
    ForeignHook { path: PathBuf, name: String },
}

/// What init or undo changed: the wire's report, built here.
pub use drsd_proto::SetupReport;

/// Sets `repo` up to move LFS objects through the agent at `agent` (an
/// absolute path to `drs-hook`), optionally recording the object remote in
/// `.gitattributes`. Idempotent.
pub fn init(repo: &Path, agent: &Path, settings: &RepoSettings) -> Result<SetupReport, SetupError> {
    let top = Repo::locate(repo)?.top;
    let mut report = SetupReport {
        repo: top.clone(),
        changed: Vec::new(),
        remote: None,
    };
    let hooks = hooks_dir(&top)?;
    check_hooks(&hooks)?;
    report.remote = check_combination(&top, settings)?;
    if config_get(&top, &["--local"], "filter.lfs.process")?.is_none() {
        run(&top, &["lfs", "install", "--local"])?;
        report.changed.push("git lfs install --local".into());
    }
    let agent_text = agent.to_string_lossy();
    let keys = [
        ("lfs.standalonetransferagent", AGENT),
        ("lfs.customtransfer.drs.path", agent_text.as_ref()),
        ("lfs.customtransfer.drs.args", "agent"),
        ("lfs.customtransfer.drs.concurrent", "true"),
        // Foreign objects are not in .git/lfs/objects: git-lfs lists them
        // and goes on, and the pre-push hook (the daemon) is the safety net.
        ("lfs.allowincompletepush", "true"),
    ];
    for (key, value) in keys {
        if config_get(&top, &["--local"], key)?.as_deref() != Some(value) {
            run(&top, &["config", "--local", key, value])?;
            report.changed.push(format!("{key}={value}"));
        }
    }
    record_settings(&top, settings, &mut report)?;
    for name in HOOKS {
        if write_hook(&hooks, name, agent)? {
            report.changed.push(format!("hook {name}"));
        }
    }
    Ok(report)
}

/// Undoes [`init`]: removes our keys and hooks and puts git-lfs's own hooks
/// back. `.gitattributes` is committed content and stays as it is.
pub fn undo(repo: &Path) -> Result<SetupReport, SetupError> {
    let top = Repo::locate(repo)?.top;
    let mut report = SetupReport {
        repo: top.clone(),
        changed: Vec::new(),
        remote: None,
    };
    if config_get(&top, &["--local"], "lfs.standalonetransferagent")?.as_deref() == Some(AGENT) {
        run(
            &top,
            &[
                "config",
                "--local",
                "--unset",
                "lfs.standalonetransferagent",
            ],
        )?;
        report
            .changed
            .push("unset lfs.standalonetransferagent".into());
    }
    if config_get(&top, &["--local"], "lfs.allowincompletepush")?.is_some() {
        run(
            &top,
            &["config", "--local", "--unset", "lfs.allowincompletepush"],
        )?;
        report.changed.push("unset lfs.allowincompletepush".into());
    }
    if config_get(&top, &["--local"], "lfs.customtransfer.drs.path")?.is_some() {
        run(
            &top,
            &[
                "config",
                "--local",
                "--remove-section",
                "lfs.customtransfer.drs",
            ],
        )?;
        report.changed.push("removed lfs.customtransfer.drs".into());
    }
    let hooks = hooks_dir(&top)?;
    let mut removed = false;
    for name in HOOKS {
        let path = hooks.join(name);
        if is_ours(&path)? {
            fs::remove_file(&path).map_err(io("remove", &path))?;
            removed = true;
        }
    }
    if removed {
        run(&top, &["lfs", "update", "--force"])?;
        report.changed.push("git-lfs's own hooks restored".into());
    }
    Ok(report)
}

/// The object remote the repo will record, checked before anything is
/// written: an Indexd (given or recorded) needs an S3 one, as its records
/// must name a place others can read.
fn check_combination(top: &Path, settings: &RepoSettings) -> Result<Option<String>, SetupError> {
    let now = recorded(top)?;
    let remote = match settings.forget_remote {
        true => None,
        false => settings.remote.clone().or(now.remote),
    };
    let indexd = settings.indexd.is_some() || now.indexd.is_some();
    if let Some(remote) = remote.as_deref().filter(|r| !r.starts_with("s3://")) {
        if indexd {
            return Err(SetupError::IndexdNeedsS3 {
                remote: remote.into(),
            });
        }
    }
    Ok(remote)
}

/// Records in the top `.gitattributes` each setting given that differs
/// from what is there, and says so in `report`; removes the object remote
/// when asked to.
fn record_settings(
    top: &Path,
    settings: &RepoSettings,
    report: &mut SetupReport,
) -> Result<(), SetupError> {
    let now = recorded(top)?;
    if settings.forget_remote && now.remote.is_some() {
        remove_attr(top, REMOTE_ATTR)?;
        report
            .changed
            .push(format!(".gitattributes {REMOTE_ATTR} removed (commit it)"));
    }
    let authz = settings.authz.join(",");
    let wanted = [
        (REMOTE_ATTR, settings.remote.clone(), now.remote.clone()),
        (
            INDEXD_ATTR,
            settings.indexd.as_ref().map(indexd_text),
            now.indexd.as_ref().map(indexd_text),
        ),
        (
            AUTHZ_ATTR,
            Some(authz).filter(|a| !a.is_empty()),
            Some(now.authz.join(",")).filter(|a| !a.is_empty()),
        ),
    ];
    for (name, value, was) in wanted {
        let Some(value) = value.filter(|v| Some(v) != was.as_ref()) else {
            continue;
        };
        check_setting(name, &value)?;
        record_attr(top, name, &value)?;
        report
            .changed
            .push(format!(".gitattributes {name}={value} (commit it)"));
    }
    Ok(())
}

/// An Indexd URL as it is recorded: without a trailing `/`.
fn indexd_text(url: &url::Url) -> String {
    url.as_str().trim_end_matches('/').to_string()
}

fn check_setting(name: &str, value: &str) -> Result<(), SetupError> {
    let one_word = !value.is_empty() && !value.chars().any(|c| c.is_whitespace() || c.is_control());
    match name {
        REMOTE_ATTR if !one_word => Err(SetupError::BadRemote { url: value.into() }),
        INDEXD_ATTR if !one_word || parse_indexd(value).is_none() => {
            Err(SetupError::BadIndexd { url: value.into() })
        }
        AUTHZ_ATTR if !one_word || parse_authz(value).is_none() => Err(SetupError::BadAuthz {
            authz: value.into(),
        }),
        _ => Ok(()),
    }
}

/// An Indexd base URL: http(s), a host, no credentials, query or fragment.
pub fn parse_indexd(text: &str) -> Option<url::Url> {
    let url = url::Url::parse(text).ok()?;
    let plain = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some_and(|h| !h.is_empty())
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none();
    plain.then_some(url)
}

/// Comma-separated `authz` resource paths, each starting with `/`.
pub fn parse_authz(text: &str) -> Option<Vec<String>> {
    let paths: Vec<String> = text.split(',').map(str::to_string).collect();
    paths
        .iter()
        .all(|p| p.len() > 1 && p.starts_with('/') && !p.contains(char::is_whitespace))
        .then_some(paths)
}

/// The object remote recorded in the repo's `.gitattributes`, if any.
pub fn recorded_remote(repo: &Path) -> Result<Option<String>, SetupError> {
    Ok(recorded(repo)?.remote)
}

/// The settings recorded in the repo's `.gitattributes`: the work tree's,
/// or HEAD's before a checkout (`drsctl clone` hydrates first). A value
/// that does not parse (an Indexd URL, an authz list) is an error naming it:
/// a push must not register objects somewhere else than the repo says.
pub fn recorded(repo: &Path) -> Result<RepoSettings, SetupError> {
    let top = Repo::locate(repo)?.top;
    let mut args = vec!["check-attr"];
    if !top.join(".gitattributes").exists() {
        args.push("--source=HEAD");
    }
    args.extend([REMOTE_ATTR, INDEXD_ATTR, AUTHZ_ATTR, "--", ".gitattributes"]);
    let out = match run(&top, &args) {
        Ok(out) => out,
        // An unborn HEAD has no attributes to read.
        Err(_) if args[1] == "--source=HEAD" => return Ok(RepoSettings::default()),
        Err(e) => return Err(e),
    };
    let mut settings = RepoSettings::default();
    for line in out.lines() {
        // ".gitattributes: drs-remote: <value>", or "unspecified" / "unset" / "set".
        let mut parts = line.rsplitn(3, ": ");
        let (Some(value), Some(name)) = (parts.next(), parts.next()) else {
            continue;
        };
        if matches!(value, "" | "unspecified" | "unset" | "set") {
            continue;
        }
        match name {
            REMOTE_ATTR => settings.remote = Some(value.to_string()),
            INDEXD_ATTR => {
                let url = parse_indexd(value).ok_or(SetupError::BadIndexd { url: value.into() })?;
                settings.indexd = Some(url);
            }
            AUTHZ_ATTR => {
                settings.authz = parse_authz(value).ok_or(SetupError::BadAuthz {
                    authz: value.into(),
                })?;
            }
            _ => {}
        }
    }
    Ok(settings)
}

/// Writes (or replaces) the `name=` line in the top `.gitattributes`.
fn record_attr(top: &Path, name: &str, value: &str) -> Result<(), SetupError> {
    rewrite_attr(top, name, Some(value))
}

/// Removes the `name=` line from the top `.gitattributes`.
fn remove_attr(top: &Path, name: &str) -> Result<(), SetupError> {
    rewrite_attr(top, name, None)
}

/// The top `.gitattributes` without its `name=` lines, and with
/// `name=value` when given.
fn rewrite_attr(top: &Path, name: &str, value: Option<&str>) -> Result<(), SetupError> {
    let path = top.join(".gitattributes");
    let old = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io("read", &path)(e)),
    };
    let mut lines: Vec<&str> = old
        .lines()
        .filter(|l| {
            !l.split_whitespace()
                .any(|w| w.starts_with(&format!("{name}=")))
        })
        .collect();
    let line = value.map(|value| format!(".gitattributes {name}={value}"));
    lines.extend(line.as_deref());
    let text = lines.join("\n") + "\n";
    safe_write::write(
        top,
        Path::new(".gitattributes"),
        text.as_bytes(),
        Mode::WORK_TREE,
    )
    .map_err(io_of(&path))
}

/// The hooks folder git runs (honours `core.hooksPath` and worktrees).
fn hooks_dir(top: &Path) -> Result<PathBuf, SetupError> {
    let out = run(top, &["rev-parse", "--git-path", "hooks"])?;
    let dir = top.join(out.trim_end_matches('\n'));
    fs::create_dir_all(&dir).map_err(io("create folder", &dir))?;
    Ok(dir)
}

/// Refuses, before anything changes, a hook that is neither ours nor git-lfs's.
fn check_hooks(dir: &Path) -> Result<(), SetupError> {
    for name in HOOKS {
        let path = dir.join(name);
        match fs::read_to_string(&path) {
            Ok(old) if !old.contains(MARK) && !is_git_lfs_hook(&old, name) => {
                return Err(SetupError::ForeignHook {
                    path,
                    name: name.into(),
                })
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("read", &path)(e)),
        }
    }
    Ok(())
}

/// Writes our hook `name`; false when it was there already, as written.
fn write_hook(dir: &Path, name: &str, agent: &Path) -> Result<bool, SetupError> {
    let path = dir.join(name);
    let text = format!(
        "#!/bin/sh\n{MARK}\n# It tells the drsd daemon, then runs git-lfs's own `git lfs {name}`.\n\
         # `drsctl init --undo` removes it.\nexec '{}' hook {name} \"$@\"\n",
        agent.display().to_string().replace('\'', "'\\''")
    );
    if fs::read_to_string(&path).is_ok_and(|old| old == text) {
        return Ok(false);
    }
    // The hooks folder is git's to name (core.hooksPath): trusted as it is;
    // the hook file itself is never written through a link.
    safe_write::write(dir, Path::new(name), text.as_bytes(), Mode::EXECUTABLE)
        .map_err(io_of(&path))?;
    Ok(true)
}

/// git-lfs's own hook: a few lines ending in `git lfs <name> "$@"`.
fn is_git_lfs_hook(text: &str, name: &str) -> bool {
    text.contains(&format!("git lfs {name} \"$@\""))
}

fn is_ours(path: &Path) -> Result<bool, SetupError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(text.contains(MARK)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io("read", path)(e)),
    }
}

fn config_get(top: &Path, scope: &[&str], key: &str) -> Result<Option<String>, SetupError> {
    let mut args = vec!["config"];
    args.extend_from_slice(scope);
    args.extend_from_slice(&["--get", key]);
    let out = git(top)
        .args(&args)
        .output()
        .map_err(|e| git_err(top, &args, e.to_string()))?;
    // Exit 1: the key is not set.
    match out.status.code() {
        Some(0) => Ok(Some(
            String::from_utf8_lossy(&out.stdout)
                .trim_end_matches('\n')
                .to_string(),
        )),
        Some(1) => Ok(None),
        _ => Err(git_err(
            top,
            &args,
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        )),
    }
}

fn run(top: &Path, args: &[&str]) -> Result<String, SetupError> {
    let out = git(top)
        .args(args)
        .output()
        .map_err(|e| git_err(top, args, e.to_string()))?;
    if !out.status.success() {
        return Err(git_err(
            top,
            args,
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn git_err(top: &Path, args: &[&str], why: String) -> SetupError {
    SetupError::Git {
        repo: top.to_path_buf(),
        args: args.join(" "),
        why,
    }
}

fn io_of(path: &Path) -> impl Fn(safe_write::SafeWriteError) -> SetupError + '_ {
    move |e| IoError::new("write", path, std::io::Error::other(e.to_string())).into()
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl Fn(std::io::Error) -> SetupError + 'a {
    move |source| IoError::new(op, path, source).into()
}
