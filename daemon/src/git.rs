//! Git plumbing: the one place the daemon starts the git binary from, and
//! where a repo's folders are found.
//!
//! Every git the daemon runs goes through [`git`], which drops `GIT_DIR`
//! and friends from our own environment: the daemon may have been started
//! from inside a hook, and those would point every command at that repo.
//! [`Repo::locate`] answers "which work tree, which git folder, which
//! common folder" with one `git rev-parse`, so callers never mix the
//! answers of two commands run at different moments.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// Why git could not answer for a path.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{path} is not a git work tree: no such folder")]
    NoFolder { path: PathBuf },
    #[error("{path} is not a git work tree: {why}")]
    NotRepo { path: PathBuf, why: String },
    #[error("git {args} in {repo}: {why}")]
    Failed {
        repo: PathBuf,
        args: String,
        why: String,
    },
}

/// A git command for `repo` that ignores any `GIT_DIR` and friends in our own
/// environment (the daemon may have been started from inside a hook).
pub fn git(repo: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(repo);
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
        // Where git reads attributes from: the daemon chooses (track::stage).
        "GIT_ATTR_SOURCE",
    ] {
        cmd.env_remove(var);
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// A git command that writes many small objects (`fast-import`), with
/// glibc's malloc told to keep freed memory up to 64 MiB instead of giving
/// it back at once: git allocates and frees a compression buffer per
/// object, and with the default threshold each free shrinks the heap and
/// the next allocation faults its pages in again (55 ms against 14 ms for
/// 1,000 pointer blobs, git 2.47). A tunable the user set wins; other C
/// libraries ignore the variable.
pub fn git_writing_many(repo: &Path) -> Command {
    let mut cmd = git(repo);
    let set = std::env::var_os(TUNABLES);
    cmd.env(TUNABLES, with_trim_threshold(set.as_deref()));
    cmd
}

const TUNABLES: &str = "GLIBC_TUNABLES";
const TRIM_THRESHOLD: &str = "glibc.malloc.trim_threshold";

/// `GLIBC_TUNABLES` (`name=value` items joined by `:`) with a trim
/// threshold of 64 MiB, unless it names one already.
fn with_trim_threshold(set: Option<&std::ffi::OsStr>) -> std::ffi::OsString {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let ours = format!("{TRIM_THRESHOLD}={}", 64 << 20).into_bytes();
    let Some(set) = set.map(OsStrExt::as_bytes).filter(|s| !s.is_empty()) else {
        return std::ffi::OsString::from_vec(ours);
    };
    let names_it = set
        .split(|b| *b == b':')
        .any(|item| item.split(|b| *b == b'=').next() == Some(TRIM_THRESHOLD.as_bytes()));
    let mut out = set.to_vec();
    if !names_it {
        out.push(b':');
        out.extend(ours);
    }
    std::ffi::OsString::from_vec(out)
}

/// Runs `git args` in `repo` and collects its output; an error only when
/// git could not be started (a failing git is the caller's to judge).
pub fn output(repo: &Path, args: &[&str]) -> Result<Output, GitError> {
    git(repo).args(args).output().map_err(|e| GitError::Failed {
        repo: repo.to_path_buf(),
        args: args.join(" "),
        why: format!("cannot run git: {e}"),
    })
}

/// The thread writing a git's standard input ([`spawn_fed`]).
pub type Feeder = std::thread::JoinHandle<std::io::Result<()>>;

/// Starts `git args` in `repo` with `input` on its standard input and its
/// standard output piped, `input` written from a thread: git may fill its
/// output pipe before it has read all of its input, and a caller writing
/// then reading would wait on git while git waits on it. Join the feeder
/// once git's output is read: its result says whether git took all input.
pub fn spawn_fed(
    repo: &Path,
    args: &[&str],
    input: Vec<u8>,
    stderr: Stdio,
) -> std::io::Result<(Child, Feeder)> {
    spawn_fed_with(git(repo).args(args), input, stderr)
}

/// [`spawn_fed`] of a [`git`] command built by the caller (extra
/// environment, say).
pub fn spawn_fed_with(
    cmd: &mut Command,
    input: Vec<u8>,
    stderr: Stdio,
) -> std::io::Result<(Child, Feeder)> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    Ok((child, feeder))
}

/// A work tree and its git folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// The top of the work tree, canonical.
    pub top: PathBuf,
    /// The work tree's own git folder (HEAD, index): `.git`, or
    /// `.git/worktrees/<name>` for a linked worktree.
    pub git_dir: PathBuf,
    /// The folder shared by all worktrees (refs, packed-refs, lfs objects);
    /// the same as `git_dir` outside linked worktrees.
    pub common_dir: PathBuf,
}

impl Repo {
    /// The work tree containing `path` (any folder inside it), with one
    /// `git rev-parse`. A bare repo or a git folder is not a work tree.
    pub fn locate(path: &Path) -> Result<Repo, GitError> {
        if !path.is_dir() {
            return Err(GitError::NoFolder {
                path: path.to_path_buf(),
            });
        }
        let args = [
            "rev-parse",
            "--show-toplevel",
            "--absolute-git-dir",
            "--git-common-dir",
        ];
        let out = output(path, &args)?;
        let not_repo = |why: String| GitError::NotRepo {
            path: path.to_path_buf(),
            why,
        };
        if !out.status.success() {
            return Err(not_repo(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines().map(PathBuf::from);
        let (Some(top), Some(git_dir), Some(common)) = (lines.next(), lines.next(), lines.next())
        else {
            return Err(not_repo(format!("unexpected answer from git: {text:?}")));
        };
        let top = top.canonicalize().map_err(|e| not_repo(e.to_string()))?;
        Ok(Repo {
            top,
            git_dir,
            common_dir: absolute_common_dir(path, common),
        })
    }
}

/// `--git-common-dir` is relative to the folder git ran in (`.git` at the
/// top, `../.git` in a subfolder) unless it is elsewhere.
fn absolute_common_dir(ran_in: &Path, common: PathBuf) -> PathBuf {
    if common.is_absolute() {
        return common;
    }
    let joined = ran_in.join(&common);
    if common
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        // `sub/../.git` names the right folder but not the way the top's
        // `.git` is named, which watch lists and comparisons rely on.
        return joined.canonicalize().unwrap_or(joined);
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) {
        let out = git(dir).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    fn new_repo(dir: &Path) -> PathBuf {
        let top = dir.join("repo");
        std::fs::create_dir(&top).unwrap();
        run(&top, &["init", "-q"]);
        top.canonicalize().unwrap()
    }

    #[test]
    fn the_trim_threshold_is_added_to_the_users_tunables_and_theirs_wins() {
        let with = |set: Option<&str>| {
            let out = with_trim_threshold(set.map(std::ffi::OsStr::new));
            out.into_string().unwrap()
        };
        let ours = "glibc.malloc.trim_threshold=67108864";
        assert_eq!(with(None), ours);
        assert_eq!(with(Some("")), ours);
        assert_eq!(
            with(Some("glibc.malloc.arena_max=2")),
            format!("glibc.malloc.arena_max=2:{ours}")
        );
        let theirs = "glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=1";
        assert_eq!(with(Some(theirs)), theirs);
        // A name that only starts like it is another tunable.
        let other = "glibc.malloc.trim_threshold_x=1";
        assert_eq!(with(Some(other)), format!("{other}:{ours}"));
    }

    #[test]
    fn a_plain_repo_is_its_own_top_with_one_git_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let top = new_repo(tmp.path());
        let repo = Repo::locate(&top).unwrap();
        assert_eq!(repo.top, top);
        assert_eq!(repo.git_dir, top.join(".git"));
        assert_eq!(repo.common_dir, top.join(".git"));
    }

    #[test]
    fn a_subfolder_locates_the_work_tree_containing_it() {
        let tmp = tempfile::tempdir().unwrap();
        let top = new_repo(tmp.path());
        let sub = top.join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        let repo = Repo::locate(&sub).unwrap();
        assert_eq!(repo.top, top);
        assert_eq!(repo.git_dir, top.join(".git"));
        assert_eq!(repo.common_dir, top.join(".git"));
    }

    #[test]
    fn a_linked_worktree_has_its_own_git_folder_and_the_main_common_one() {
        let tmp = tempfile::tempdir().unwrap();
        let top = new_repo(tmp.path());
        run(
            &top,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "first",
            ],
        );
        let linked = tmp.path().join("linked");
        run(&top, &["worktree", "add", "-q", linked.to_str().unwrap()]);
        let repo = Repo::locate(&linked).unwrap();
        assert_eq!(repo.top, linked.canonicalize().unwrap());
        assert_eq!(repo.git_dir, top.join(".git/worktrees/linked"));
        assert_eq!(repo.common_dir, top.join(".git"));
        assert_ne!(repo.git_dir, repo.common_dir);
    }

    #[test]
    fn a_bare_repo_is_refused_by_its_path() {
        let tmp = tempfile::tempdir().unwrap();
        let bare = tmp.path().join("bare.git");
        std::fs::create_dir(&bare).unwrap();
        run(&bare, &["init", "-q", "--bare"]);
        let err = Repo::locate(&bare).unwrap_err();
        assert!(
            matches!(err, GitError::NotRepo { ref path, .. } if *path == bare),
            "{err}"
        );
        assert!(err.to_string().contains(bare.to_str().unwrap()), "{err}");
    }

    #[test]
    fn a_folder_outside_any_repo_is_refused_by_its_path() {
        let tmp = tempfile::tempdir().unwrap();
        let err = Repo::locate(tmp.path()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "{} is not a git work tree: ",
                tmp.path().display()
            )),
            "{text}"
        );
    }

    #[test]
    fn a_missing_folder_is_refused_without_running_git() {
        let tmp = tempfile::tempdir().unwrap();
        let gone = tmp.path().join("gone");
        let err = Repo::locate(&gone).unwrap_err();
        assert!(
            matches!(err, GitError::NoFolder { ref path } if *path == gone),
            "{err}"
        );
    }
}
