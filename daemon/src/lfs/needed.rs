//! What a repo needs on this machine, by `git lfs prune`'s own rules (its
//! `prune.go`, git-lfs 3.3), so that `drsctl prune` frees nothing git-lfs
//! would keep, and one thing more: every branch and tag tip, recent or not.
//!
//! Needed: the trees of HEAD, of every branch and tag tip, of each other
//! worktree's HEAD; the index of every worktree; each stash (its work
//! tree, index and untracked commits); every object an unpushed commit
//! reaches (not reachable from `lfs.pruneremotetocheck`'s refs, `origin`
//! by default: with no such refs, everything is unpushed); and, when
//! `lfs.fetchrecentcommitsdays` is above 0, every version within that many
//! days (plus `lfs.pruneoffsetdays`) of the tips of HEAD and of the refs
//! changed within `lfs.fetchrecentrefsdays` (plus the offset), remote refs
//! among them unless `lfs.fetchrecentremoterefs` is false. With git-lfs's
//! defaults (7, 0, 3), an object only an older commit names is not needed.
//!
//! The blobs are listed with `rev-list --objects` (pointer-sized ones
//! only) and read through one `cat-file --batch`, as the pre-push scan
//! reads them.

use std::collections::BTreeSet;
use std::path::Path;

use super::pointer::MAX_POINTER_SIZE;
use super::scan::{git_failed, read_pointers, small_blob_ids, ScanError};
use crate::pool::Oid;

const DAY: u64 = 86_400;

/// git-lfs's settings of what is recent, as the repo's git config sets
/// them, else git-lfs's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recent {
    pub refs_days: u64,
    pub commits_days: u64,
    pub offset_days: u64,
    pub remote_refs: bool,
    /// The remote whose refs say what is pushed.
    pub remote: String,
}

impl Default for Recent {
    fn default() -> Recent {
        Recent {
            refs_days: 7,
            commits_days: 0,
            offset_days: 3,
            remote_refs: true,
            remote: "origin".into(),
        }
    }
}

impl Recent {
    /// From `repo`'s git config; a value git-lfs would not read as a
    /// number keeps the default, as git-lfs does.
    pub fn read(repo: &Path) -> Result<Recent, ScanError> {
        let d = Recent::default();
        let days = |key: &str, default: u64| -> Result<u64, ScanError> {
            Ok(config(repo, key)?
                .and_then(|v| v.parse().ok())
                .unwrap_or(default))
        };
        Ok(Recent {
            refs_days: days("lfs.fetchrecentrefsdays", d.refs_days)?,
            commits_days: days("lfs.fetchrecentcommitsdays", d.commits_days)?,
            offset_days: days("lfs.pruneoffsetdays", d.offset_days)?,
            remote_refs: config(repo, "lfs.fetchrecentremoterefs")?.map_or(d.remote_refs, |v| {
                !matches!(v.as_str(), "false" | "0" | "no" | "off")
            }),
            remote: config(repo, "lfs.pruneremotetocheck")?
                .filter(|v| !v.is_empty())
                .unwrap_or(d.remote),
        })
    }
}

/// The oids of every LFS pointer `repo` needs (see the module's notes), at
/// `now` (seconds since the epoch).
pub fn needed_pointers(repo: &Path, recent: &Recent, now: u64) -> Result<BTreeSet<Oid>, ScanError> {
    let refs = refs(repo)?;
    let mut tips: Vec<String> = refs
        .iter()
        .filter(|r| !r.remote)
        .map(|r| r.id.clone())
        .collect();
    let head = head(repo)?;
    tips.extend(head.clone());
    tips.extend(worktree_heads(repo)?);
    tips.extend(stash_commits(repo)?);
    let recent_cut = now.saturating_sub((recent.refs_days + recent.offset_days) * DAY);
    let recent_refs: Vec<&Ref> = refs
        .iter()
        .filter(|r| recent.refs_days > 0 && r.date >= recent_cut)
        .filter(|r| !r.remote || recent.remote_refs)
        .collect();
    tips.extend(
        recent_refs
            .iter()
            .filter(|r| r.remote)
            .map(|r| r.id.clone()),
    );
    if recent.commits_days > 0 {
        let mut windows: Vec<(String, u64)> =
            recent_refs.iter().map(|r| (r.id.clone(), r.date)).collect();
        if let Some(head) = &head {
            windows.push((head.clone(), commit_date(repo, head)?));
        }
        for (tip, date) in windows {
            let since = date.saturating_sub((recent.commits_days + recent.offset_days) * DAY);
            tips.extend(window_commits(repo, &tip, since)?);
        }
    }
    let mut ids = tree_blobs(repo, &tips)?;
    ids.extend(unpushed_blobs(repo, &recent.remote)?);
    ids.extend(index_blobs(repo)?);
    let ids: Vec<String> = ids.into_iter().collect();
    let small = small_blob_ids(repo, ids.iter())?;
    Ok(read_pointers(repo, &small)?
        .into_values()
        .map(|p| p.oid)
        .collect())
}

/// A ref's commit and its committer date.
struct Ref {
    id: String,
    date: u64,
    remote: bool,
}

fn run(repo: &Path, args: &[&str]) -> Result<std::process::Output, ScanError> {
    let out = crate::git::output(repo, args)?;
    if !out.status.success() {
        return Err(git_failed(repo, args, &out.stderr));
    }
    Ok(out)
}

fn lines(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

fn config(repo: &Path, key: &str) -> Result<Option<String>, ScanError> {
    let out = crate::git::output(repo, &["config", "--get", key])?;
    // 1: not set. Anything else is git's error.
    match out.status.code() {
        Some(0) => Ok(lines(&out).into_iter().next()),
        Some(1) => Ok(None),
        _ => Err(git_failed(repo, &["config", "--get", key], &out.stderr)),
    }
}

/// Branches, tags (peeled to what they name) and remote refs. A field
/// may be empty (a lightweight tag peels to nothing): fields are split on
/// tabs, never trimmed.
fn refs(repo: &Path) -> Result<Vec<Ref>, ScanError> {
    let format = "--format=%(refname)%09%(objectname)%09%(*objectname)%09%(committerdate:unix)%09%(*committerdate:unix)";
    let args = [
        "for-each-ref",
        format,
        "refs/heads",
        "refs/tags",
        "refs/remotes",
    ];
    let out = run(repo, &args)?;
    let mut refs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [name, id, peeled, date, peeled_date] = f[..] else {
            continue;
        };
        let id = if peeled.is_empty() { id } else { peeled };
        let date = if date.is_empty() { peeled_date } else { date };
        refs.push(Ref {
            id: id.to_string(),
            // A ref with no date (a tag of a tree) counts as recent.
            date: date.parse().unwrap_or(u64::MAX),
            remote: name.starts_with("refs/remotes/"),
        });
    }
    Ok(refs)
}

fn head(repo: &Path) -> Result<Option<String>, ScanError> {
    let out = crate::git::output(repo, &["rev-parse", "-q", "--verify", "HEAD^{commit}"])?;
    Ok(lines(&out)
        .into_iter()
        .next()
        .filter(|_| out.status.success()))
}

fn commit_date(repo: &Path, id: &str) -> Result<u64, ScanError> {
    let out = run(repo, &["show", "-s", "--format=%ct", id])?;
    Ok(lines(&out)
        .first()
        .and_then(|d| d.parse().ok())
        .unwrap_or(u64::MAX))
}

/// Every other worktree's HEAD.
fn worktree_heads(repo: &Path) -> Result<Vec<String>, ScanError> {
    let out = run(repo, &["worktree", "list", "--porcelain"])?;
    Ok(lines(&out)
        .into_iter()
        .filter_map(|l| l.strip_prefix("HEAD ").map(String::from))
        .collect())
}

fn worktree_paths(repo: &Path) -> Result<Vec<String>, ScanError> {
    let out = run(repo, &["worktree", "list", "--porcelain"])?;
    Ok(lines(&out)
        .into_iter()
        .filter_map(|l| l.strip_prefix("worktree ").map(String::from))
        .collect())
}

/// Each stash entry and its parents (the index and untracked commits).
fn stash_commits(repo: &Path) -> Result<Vec<String>, ScanError> {
    let has = crate::git::output(repo, &["rev-parse", "-q", "--verify", "refs/stash"])?;
    if !has.status.success() {
        return Ok(Vec::new());
    }
    let out = run(repo, &["log", "-g", "--format=%H %P", "refs/stash"])?;
    Ok(lines(&out)
        .iter()
        .flat_map(|l| l.split(' ').map(String::from).collect::<Vec<_>>())
        .collect())
}

/// The commits from `tip` back to `since`, and their parents (the
/// versions the window's changes replaced).
fn window_commits(repo: &Path, tip: &str, since: u64) -> Result<Vec<String>, ScanError> {
    let since = format!("--since={since}");
    let out = run(repo, &["rev-list", "--parents", &since, tip])?;
    Ok(lines(&out)
        .iter()
        .flat_map(|l| l.split(' ').map(String::from).collect::<Vec<_>>())
        .collect())
}

fn filter() -> String {
    format!("--filter=blob:limit={MAX_POINTER_SIZE}")
}

/// The blobs in the trees of `commits` (each tree only, no history).
fn tree_blobs(repo: &Path, commits: &[String]) -> Result<BTreeSet<String>, ScanError> {
    if commits.is_empty() {
        return Ok(BTreeSet::new());
    }
    let filter = filter();
    let args = ["rev-list", "--objects", "--no-walk", &filter, "--stdin"];
    let input: String = commits.iter().map(|c| format!("{c}\n")).collect();
    let fail = |why: String| ScanError::Git {
        repo: repo.to_path_buf(),
        args: args.join(" "),
        why,
    };
    let (child, feeder) = crate::git::spawn_fed(
        repo,
        &args,
        input.into_bytes(),
        std::process::Stdio::piped(),
    )
    .map_err(|e| fail(format!("cannot run git: {e}")))?;
    let out = child
        .wait_with_output()
        .map_err(|e| fail(format!("reading its output: {e}")))?;
    let _ = feeder.join();
    if !out.status.success() {
        return Err(git_failed(repo, &args, &out.stderr));
    }
    Ok(listed_with_path(&out))
}

/// What commits not yet on `remote` reach and its refs do not.
fn unpushed_blobs(repo: &Path, remote: &str) -> Result<BTreeSet<String>, ScanError> {
    let filter = filter();
    let not = format!("--remotes={remote}");
    let mut args = vec![
        "rev-list",
        "--objects",
        &filter,
        "--branches",
        "--tags",
        "--not",
        &not,
    ];
    if head(repo)?.is_some() {
        args.insert(3, "HEAD");
    }
    Ok(listed_with_path(&run(repo, &args)?))
}

/// `<id> <path>` lines of `rev-list --objects`: the trees' entries.
fn listed_with_path(out: &std::process::Output) -> BTreeSet<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(id, _)| id.to_string()))
        .collect()
}

/// The blobs in every worktree's index.
fn index_blobs(repo: &Path) -> Result<BTreeSet<String>, ScanError> {
    let mut ids = BTreeSet::new();
    let mut trees = worktree_paths(repo)?;
    if trees.is_empty() {
        trees.push(repo.display().to_string());
    }
    // A worktree whose folder is gone (`git worktree prune` would drop
    // it) has no index to read.
    for tree in trees.into_iter().filter(|t| Path::new(t).is_dir()) {
        let args = ["ls-files", "-s", "-z"];
        let out = run(Path::new(&tree), &args)?;
        for entry in out.stdout.split(|b| *b == 0) {
            let meta = entry.split(|b| *b == b'\t').next().unwrap_or_default();
            let text = String::from_utf8_lossy(meta);
            if let Some(id) = text.split_ascii_whitespace().nth(1) {
                ids.insert(id.to_string());
            }
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lfs::Pointer;
    use std::path::PathBuf;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Writes a pointer to `content` at `name` and returns its oid.
    fn write(top: &Path, name: &str, content: &str) -> Oid {
        let pointer = Pointer {
            oid: Oid::of(content.as_bytes()),
            size: content.len() as u64,
        };
        std::fs::write(top.join(name), pointer.to_text()).unwrap();
        pointer.oid
    }

    fn commit(top: &Path, name: &str, content: &str) -> Oid {
        let oid = write(top, name, content);
        git(top, &["add", name]);
        git(top, &["commit", "-qm", content]);
        oid
    }

    /// A repo whose `f` had versions one, two (both pushed to `origin`)
    /// and three (committed, not pushed).
    fn repo() -> (tempfile::TempDir, PathBuf, [Oid; 3]) {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path().join("repo");
        std::fs::create_dir(&top).unwrap();
        git(&top, &["init", "-q", "-b", "main"]);
        let bare = tmp.path().join("bare.git");
        git(
            tmp.path(),
            &["init", "-q", "--bare", bare.to_str().unwrap()],
        );
        git(&top, &["remote", "add", "origin", bare.to_str().unwrap()]);
        let one = commit(&top, "f", "one");
        let two = commit(&top, "f", "two");
        git(&top, &["push", "-q", "origin", "main"]);
        (tmp, top, [one, two, Oid::of(b"none")])
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    #[test]
    fn with_git_lfs_defaults_only_an_old_commit_s_object_is_unneeded() {
        let (_tmp, top, [one, two, _]) = repo();
        let needed = needed_pointers(&top, &Recent::read(&top).unwrap(), now()).unwrap();
        assert!(needed.contains(&two));
        assert!(!needed.contains(&one));
    }

    #[test]
    fn unpushed_commits_the_index_a_stash_and_tags_are_needed() {
        let (_tmp, top, [one, _, _]) = repo();
        let unpushed_old = commit(&top, "f", "three");
        commit(&top, "f", "four");
        let staged = write(&top, "g", "staged");
        git(&top, &["add", "g"]);
        let stashed = write(&top, "g", "stashed");
        git(&top, &["stash", "-q"]);
        git(&top, &["tag", "v1", "HEAD~3"]);
        let needed = needed_pointers(&top, &Recent::default(), now()).unwrap();
        assert!(
            needed.contains(&unpushed_old),
            "an unpushed commit's object"
        );
        assert!(needed.contains(&staged), "the stash's index");
        assert!(needed.contains(&stashed), "the stash's work tree");
        assert!(needed.contains(&one), "a tag's tip");
    }

    #[test]
    fn recent_commits_days_keep_the_versions_a_recent_change_replaced() {
        let (_tmp, top, [one, _, _]) = repo();
        git(&top, &["config", "lfs.fetchrecentcommitsdays", "1"]);
        let recent = Recent::read(&top).unwrap();
        assert_eq!((recent.commits_days, recent.refs_days), (1, 7));
        let needed = needed_pointers(&top, &recent, now()).unwrap();
        assert!(needed.contains(&one));
    }

    #[test]
    fn every_branch_tip_is_needed_however_old() {
        let (_tmp, top, [one, _, _]) = repo();
        git(&top, &["branch", "old", "HEAD~1"]);
        let later = now() + 100 * DAY;
        let needed = needed_pointers(&top, &Recent::default(), later).unwrap();
        assert!(needed.contains(&one));
    }

    #[test]
    fn without_the_remote_s_refs_everything_is_unpushed_and_needed() {
        let (_tmp, top, [one, _, _]) = repo();
        git(&top, &["config", "lfs.pruneremotetocheck", "elsewhere"]);
        let needed = needed_pointers(&top, &Recent::read(&top).unwrap(), now()).unwrap();
        assert!(needed.contains(&one));
    }
}
