//! `drsctl init` and `drsctl clone`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, Context};
use drsd_proto::stamp::{write_stamps, STAMPS_ENV};
use drsd_proto::{FileStamp, HydrateReport, RepoInitRequest, SetupReport};

use crate::exit::Failure;
use crate::output::Output;

/// What `drsctl init` records in `.gitattributes` for every clone.
#[derive(Debug, Default)]
pub struct Settings {
    pub remote: Option<String>,
    /// Remove the recorded object remote.
    pub no_remote: bool,
    pub indexd: Option<String>,
    pub authz: Option<String>,
}

/// Sets the repo at `path` up for drsd (or back, with `undo`).
pub async fn init(
    socket: &Path,
    path: Option<PathBuf>,
    settings: Settings,
    undo: bool,
    out: &Output,
) -> Result<(), Failure> {
    let path = std::path::absolute(path.unwrap_or_else(|| PathBuf::from(".")))
        .context("making the repo path absolute")?;
    let report = request(socket, path, settings, undo).await?;
    out.show(&report, || {
        if report.changed.is_empty() {
            println!(
                "{} was already {}",
                report.repo.display(),
                if undo { "undone" } else { "set up" }
            );
        }
        for change in &report.changed {
            println!("{}: {change}", report.repo.display());
        }
        if !undo && report.remote.is_none() {
            println!("{}: no object remote: pushes of LFS objects need one; add it with drsctl init --remote s3://bucket/prefix (or --remote /shared/folder)", report.repo.display());
        }
    });
    Ok(())
}

async fn request(
    socket: &Path,
    path: PathBuf,
    settings: Settings,
    undo: bool,
) -> Result<SetupReport, Failure> {
    let mut client = super::connect(socket).await?;
    let agent = agent_path()?;
    let Settings {
        remote,
        no_remote,
        indexd,
        authz,
    } = settings;
    let report = client
        .repo_init(RepoInitRequest {
            path,
            agent,
            remote,
            indexd,
            authz,
            undo,
            no_remote,
        })
        .await?;
    Ok(report)
}

/// `drs-hook` beside this drsctl (how both are installed), else `$DRS_HOOK`.
fn agent_path() -> Result<PathBuf, Failure> {
    if let Some(path) = std::env::var_os("DRS_HOOK").filter(|p| !p.is_empty()) {
        return Ok(std::path::absolute(PathBuf::from(path)).context("making $DRS_HOOK absolute")?);
    }
    let exe = std::env::current_exe().context("finding drsctl's own path")?;
    let sibling = exe.with_file_name("drs-hook");
    if !sibling.exists() {
        return Err(anyhow!(
            "no drs-hook beside {}: install both, or set DRS_HOOK",
            exe.display()
        )
        .into());
    }
    Ok(sibling)
}

/// Clone without smudge, set up, fetch the objects through our agent, check
/// out: the pointer files as they are, then their objects from the pool
/// (git would hold each smudged file whole in memory), then the index
/// refreshed through `drs-hook filter-process`, which hashes what the
/// daemon wrote. What the pool could not fill git-lfs checks out.
pub async fn clone(
    socket: &Path,
    url: &str,
    dir: Option<PathBuf>,
    out: &Output,
) -> Result<(), Failure> {
    let dir = match dir {
        Some(d) => d,
        None => PathBuf::from(default_dir(url)?),
    };
    git(
        None,
        &[
            "clone",
            "--quiet",
            "--no-checkout",
            url,
            &dir.to_string_lossy(),
        ],
        true,
        out,
    )?;
    let dir = std::path::absolute(&dir).context("making the clone's path absolute")?;
    let report = request(socket, dir.clone(), Settings::default(), false).await?;
    let hydrated = hydrate(socket, &dir, out).await?;
    git(Some(&dir), &["checkout", "--quiet"], true, out)?;
    let checked_out = super::connect(socket).await?.check_out(dir.clone()).await?;
    for problem in checked_out.left.iter().filter(|_| !out.json) {
        eprintln!(
            "drsctl: {} was left as it was: {}",
            problem.path, problem.why
        );
    }
    if checked_out.written > 0 {
        refresh_index(&dir, &checked_out.stamps, out)?;
    }
    if !checked_out.to_git.is_empty() {
        // git-lfs's smudge finds what hydrate placed, or fetches it through
        // the agent (and reports what it cannot).
        for paths in checked_out.to_git.chunks(1000) {
            let literal: Vec<String> = paths.iter().map(|p| format!(":(literal){p}")).collect();
            let mut args = vec!["checkout", "--quiet", "--"];
            args.extend(literal.iter().map(String::as_str));
            git(Some(&dir), &args, false, out)?;
        }
    }
    let all = serde_json::json!({ "setup": report, "hydrate": hydrated, "checkout": checked_out });
    out.show(&all, || {
        println!(
            "cloned {url} into {} with drsd: {} objects, {} from the pool, {} downloaded",
            dir.display(),
            hydrated.objects,
            hydrated.from_pool + hydrated.present,
            hydrated.downloaded
        )
    });
    Ok(())
}

/// Has git record the stat data of the files the daemon wrote, cleaning
/// them with `drs-hook filter-process` (which hashes them, as git-lfs's
/// clean would, without copying each into `.git/lfs/objects` again), but
/// for those whose stamp still matches: the daemon wrote them from checked
/// bytes, and the filter answers their pointer without hashing them again.
/// The stamps go in a temp file only this user can read or replace.
fn refresh_index(dir: &Path, stamps: &[FileStamp], out: &Output) -> Result<(), Failure> {
    let agent = agent_path()?;
    let process = format!("{} filter-process", shell_quote(&agent.to_string_lossy()));
    let mut file = tempfile::Builder::new()
        .prefix("drsctl-stamps-")
        .tempfile()
        .context("creating a temp file for the check-out's stamps")?;
    write_stamps(stamps, file.as_file_mut()).context("writing the check-out's stamps")?;
    let env = [(STAMPS_ENV, file.path().as_os_str())];
    git_with(
        Some(dir),
        &env,
        &[
            "-c",
            &format!("filter.lfs.process={process}"),
            "-c",
            "filter.lfs.required=true",
            "update-index",
            "-q",
            "--refresh",
        ],
        out,
    )
}

/// `text` as one word for the shell git runs a filter through.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Asks the daemon to put HEAD's objects in the clone's `.git/lfs/objects`,
/// with a progress bar on standard error.
async fn hydrate(socket: &Path, dir: &Path, out: &Output) -> Result<HydrateReport, Failure> {
    let mut client = super::connect(socket).await?;
    let bar = crate::output::progress_bar(out, "{spinner} objects {pos}/{len} [{elapsed}]");
    let report = client
        .hydrate(dir.to_path_buf(), |p| {
            bar.set_length(p.total.unwrap_or(0));
            bar.set_position(p.done);
        })
        .await;
    bar.finish_and_clear();
    let report = report?;
    for problem in report.failed.iter().filter(|_| !out.json) {
        eprintln!(
            "drsctl: object {} was not hydrated: {}",
            problem.oid, problem.why
        );
    }
    Ok(report)
}

fn default_dir(url: &str) -> Result<String, Failure> {
    let name = url
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or("");
    let name = name.strip_suffix(".git").unwrap_or(name);
    if name.is_empty() {
        return Err(anyhow!("cannot name a folder after {url:?}: give DIR").into());
    }
    Ok(name.to_string())
}

/// Runs git; with `--json` its messages are kept off standard error (where
/// only drsctl's JSON error may go) and put in the error when it fails.
fn git(dir: Option<&Path>, args: &[&str], skip_smudge: bool, out: &Output) -> Result<(), Failure> {
    let env = [("GIT_LFS_SKIP_SMUDGE", OsStr::new("1"))];
    git_with(dir, &env[..usize::from(skip_smudge)], args, out)
}

/// [`git`] with `env` added to its environment.
fn git_with(
    dir: Option<&Path>,
    env: &[(&str, &OsStr)],
    args: &[&str],
    out: &Output,
) -> Result<(), Failure> {
    let mut cmd = Command::new("git");
    if let Some(dir) = dir {
        cmd.arg("-C").arg(dir);
    }
    cmd.envs(env.iter().copied());
    cmd.args(args);
    if out.json {
        cmd.stderr(std::process::Stdio::piped());
    }
    let done = cmd
        .output()
        .with_context(|| format!("running git {}", args[0]))?;
    if !done.status.success() {
        let said = String::from_utf8_lossy(&done.stderr);
        let said = match said.trim() {
            "" => "see its message above".to_string(),
            said => said.replace('\n', "; "),
        };
        return Err(anyhow!("git {} failed: {said}", args.join(" ")).into());
    }
    Ok(())
}
