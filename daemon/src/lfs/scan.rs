//! Scanning a repo: the LFS pointers in HEAD's tree and where their objects are.
//!
//! Uses the real git binary: `ls-tree -r -l` lists HEAD's blobs with their
//! sizes, the small ones are read through one `cat-file --batch`, and those
//! that parse as pointers are looked up in `.git/lfs/objects` and the pool.
//! Running git and finding a repo's folders are `crate::git`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use crate::git::{Feeder, GitError, Repo};
use crate::pool::{Oid, Pool, PoolError};
use drsd_proto::ScanReport;

use super::pointer::{Pointer, MAX_POINTER_SIZE};

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("repo {repo} is gone: {why}")]
    Missing { repo: PathBuf, why: String },
    #[error("{repo} is not a git work tree: {why}")]
    NotRepo { repo: PathBuf, why: String },
    #[error("git {args} in {repo}: {why}")]
    Git {
        repo: PathBuf,
        args: String,
        why: String,
    },
    #[error("looking up objects of {repo} in the pool: {source}")]
    Pool {
        repo: PathBuf,
        #[source]
        source: Box<PoolError>,
    },
}

impl From<GitError> for ScanError {
    fn from(e: GitError) -> ScanError {
        match e {
            GitError::NoFolder { path } => ScanError::NotRepo {
                repo: path,
                why: "no such folder".into(),
            },
            GitError::NotRepo { path, why } => ScanError::NotRepo { repo: path, why },
            GitError::Failed { repo, args, why } => ScanError::Git { repo, args, why },
        }
    }
}

fn run(repo: &Path, args: &[&str]) -> Result<std::process::Output, ScanError> {
    Ok(crate::git::output(repo, args)?)
}

/// A registered repo's folders ([`Repo::locate`]), its failure read as
/// [`ScanError::Missing`]: the repo is gone, not broken.
pub fn locate_registered(repo: &Path) -> Result<Repo, ScanError> {
    Repo::locate(repo).map_err(|e| gone(repo, e))
}

/// A registered repo that git no longer finds is missing, not broken: it
/// may come back (a remounted disk, a restored folder).
fn gone(repo: &Path, e: GitError) -> ScanError {
    let why = match e {
        GitError::NoFolder { .. } => "the folder no longer exists".to_string(),
        GitError::NotRepo { why, .. } => format!("it is no longer a git repo ({why})"),
        failed @ GitError::Failed { .. } => return failed.into(),
    };
    ScanError::Missing {
        repo: repo.to_path_buf(),
        why,
    }
}

/// Scans HEAD's tree of `repo` for LFS pointers and counts where their objects are.
pub fn scan_repo(repo: &Path, pool: &Pool) -> Result<ScanReport, ScanError> {
    scan_in(
        repo,
        &locate_registered(repo)?,
        pool,
        &mut HeadPointers::default(),
    )
}

/// The pointers of the commit a repo's HEAD was at when last scanned. The
/// watcher rescans a repo on every write to its index (each add-url batch
/// makes one) while HEAD stays where it was: reading its tree again each
/// time cost 0.14 s at 10,000 pointers, and grew with the repo.
#[derive(Debug, Default)]
pub struct HeadPointers {
    last: Option<(String, Vec<Pointer>)>,
}

/// [`scan_repo`] with the repo's git folders already known, and the
/// pointers of its last scanned HEAD.
pub fn scan_in(
    repo: &Path,
    dirs: &Repo,
    pool: &Pool,
    known: &mut HeadPointers,
) -> Result<ScanReport, ScanError> {
    let mut report = ScanReport {
        scanned_at: unix_now(),
        ..ScanReport::default()
    };
    let Some(head) = head_commit(repo)? else {
        return Ok(report); // unborn branch: nothing committed yet
    };
    let pointers = match known.last.take() {
        Some((commit, pointers)) if commit == head => pointers,
        _ => read_pointers(repo, &small_blobs(repo)?)?
            .into_values()
            .collect(),
    };
    report.head = Some(head.clone());
    report.pointers = pointers.len() as u64;
    let objects = dirs.common_dir.join("lfs").join("objects");
    let counted = count_places(repo, &objects, &pointers, pool, &mut report);
    known.last = Some((head, pointers));
    counted.map(|()| report)
}

/// Counts where each of `pointers`' objects is, adopting into the pool
/// those only the repo holds.
fn count_places(
    repo: &Path,
    objects: &Path,
    pointers: &[Pointer],
    pool: &Pool,
    report: &mut ScanReport,
) -> Result<(), ScanError> {
    for pointer in pointers {
        if in_lfs_objects(objects, pointer) {
            report.in_repo += 1;
            adopt(objects, pointer, pool);
        } else if pool.has(&pointer.oid).map_err(|source| ScanError::Pool {
            repo: repo.to_path_buf(),
            source: Box::new(source),
        })? {
            report.in_pool += 1;
        } else {
            report.absent += 1;
        }
    }
    Ok(())
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn head_commit(repo: &Path) -> Result<Option<String>, ScanError> {
    let out = run(repo, &["rev-parse", "-q", "--verify", "HEAD^{commit}"])?;
    let head = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok((out.status.success() && !head.is_empty()).then_some(head))
}

/// Blob ids in HEAD's tree small enough to be pointers (each once).
fn small_blobs(repo: &Path) -> Result<Vec<String>, ScanError> {
    let args = ["ls-tree", "-r", "-l", "-z", "HEAD"];
    let out = run(repo, &args)?;
    if !out.status.success() {
        return Err(git_failed(repo, &args, &out.stderr));
    }
    let mut ids: Vec<String> = out
        .stdout
        .split(|b| *b == 0)
        .filter_map(small_blob_id)
        .collect();
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// `<mode> SP blob SP <id> SP+ <size> TAB <path>` -> id, when size < 1024.
fn small_blob_id(entry: &[u8]) -> Option<String> {
    let meta = entry.split(|b| *b == b'\t').next()?;
    let mut fields = std::str::from_utf8(meta).ok()?.split_ascii_whitespace();
    fields.next()?; // the mode
    small_blob(fields)
}

/// `blob <id> <size>` -> id, when size < 1024.
fn small_blob<'a>(mut fields: impl Iterator<Item = &'a str>) -> Option<String> {
    let (kind, id, size) = (fields.next()?, fields.next()?, fields.next()?);
    let size: u64 = size.parse().ok()?;
    (kind == "blob" && size < MAX_POINTER_SIZE).then(|| id.to_string())
}

pub(crate) fn git_failed(repo: &Path, args: &[&str], stderr: &[u8]) -> ScanError {
    ScanError::Git {
        repo: repo.to_path_buf(),
        args: args.join(" "),
        why: String::from_utf8_lossy(stderr).trim().to_string(),
    }
}

/// Reads `ids` through one `git cat-file --batch`; returns those that are
/// pointers, keyed by blob id.
pub(crate) fn read_pointers(
    repo: &Path,
    ids: &[String],
) -> Result<BTreeMap<String, Pointer>, ScanError> {
    let args = ["cat-file", "--batch"];
    let fail = |why: String| ScanError::Git {
        repo: repo.to_path_buf(),
        args: args.join(" "),
        why,
    };
    let input: String = ids.iter().map(|id| format!("{id}\n")).collect();
    let (mut child, feeder) = spawn_fed(repo, &args, input).map_err(|e| fail(e.to_string()))?;
    let mut out = BufReader::new(child.stdout.take().expect("stdout is piped"));
    let mut pointers = BTreeMap::new();
    for id in ids {
        let body =
            read_batch_entry(&mut out).map_err(|e| fail(format!("reading blob {id}: {e}")))?;
        if let Some(Ok(pointer)) = body.map(|b| Pointer::parse(&b)) {
            pointers.insert(id.clone(), pointer);
        }
    }
    let _ = feeder.join();
    let _ = child.wait();
    Ok(pointers)
}

/// Git could not be started: the `why` of the `ScanError::Git` that names
/// the repo and the command.
#[derive(Debug, thiserror::Error)]
#[error("cannot run git: {0}")]
struct CannotRunGit(std::io::Error);

fn spawn_fed(repo: &Path, args: &[&str], input: String) -> Result<(Child, Feeder), CannotRunGit> {
    crate::git::spawn_fed(repo, args, input.into_bytes(), Stdio::null()).map_err(CannotRunGit)
}

/// One `<id> <type> <size>\n<content>\n` entry; `None` for a `missing` one.
pub(crate) fn read_batch_entry(out: &mut impl BufRead) -> std::io::Result<Option<Vec<u8>>> {
    let mut header = String::new();
    if out.read_line(&mut header)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "git stopped early",
        ));
    }
    let fields: Vec<&str> = header.split_ascii_whitespace().collect();
    let Some(size) = fields.get(2).and_then(|s| s.parse::<usize>().ok()) else {
        return Ok(None); // "<id> missing"
    };
    let mut body = vec![0; size + 1];
    out.read_exact(&mut body)?;
    body.pop(); // the newline after the content
    Ok(Some(body))
}

fn object_path(objects: &Path, pointer: &Pointer) -> PathBuf {
    let hex = pointer.oid.to_hex();
    objects.join(&hex[0..2]).join(&hex[2..4]).join(&hex)
}

/// Counted by length, as git-lfs counts its store: a figure for the scan's
/// report and a reason to try adopting, never a trust decision (what is
/// adopted is hashed first, `adopt`).
fn in_lfs_objects(objects: &Path, pointer: &Pointer) -> bool {
    std::fs::metadata(object_path(objects, pointer))
        .is_ok_and(|m| m.is_file() && m.len() == pointer.size)
}

/// Takes an object git-lfs stored itself (a `git add` of a real file) into
/// the pool, by hard link where it can, so other repos share it. One that
/// does not hash to its oid stays out, with a warning: git-lfs's own
/// `fsck` is the tool for the repo's copy.
fn adopt(objects: &Path, pointer: &Pointer, pool: &Pool) {
    if pool.has(&pointer.oid).unwrap_or(true) {
        return;
    }
    let path = object_path(objects, pointer);
    if let Err(e) = pool.adopt_file(&path, Some(&pointer.oid)) {
        log::warn!("not adopting {} into the pool: {e}", path.display());
    }
}

/// The LFS pointers in HEAD's tree, one per object.
pub fn head_pointers(repo: &Path) -> Result<Vec<Pointer>, ScanError> {
    if head_commit(repo)?.is_none() {
        return Ok(Vec::new());
    }
    let mut pointers: Vec<Pointer> = read_pointers(repo, &small_blobs(repo)?)?
        .into_values()
        .collect();
    pointers.sort_by_key(|p| p.oid);
    pointers.dedup_by_key(|p| p.oid);
    Ok(pointers)
}

/// Every LFS pointer in the repo's object database: all refs, the index,
/// stashes, reflogs, worktrees and unreachable blobs alike. More than is
/// reachable, never less: what the pool's gc must keep.
pub fn stored_pointers(repo: &Path) -> Result<BTreeSet<Oid>, ScanError> {
    let args = [
        "cat-file",
        "--batch-all-objects",
        "--batch-check=%(objecttype) %(objectname) %(objectsize)",
    ];
    let out = run(repo, &args)?;
    if !out.status.success() {
        return Err(git_failed(repo, &args, &out.stderr));
    }
    let ids: Vec<String> = out
        .stdout
        .split(|b| *b == b'\n')
        .filter_map(|line| small_blob(std::str::from_utf8(line).ok()?.split_ascii_whitespace()))
        .collect();
    Ok(read_pointers(repo, &ids)?
        .into_values()
        .map(|p| p.oid)
        .collect())
}

/// An object a push would send, with every path it has in the pushed commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    pub pointer: Pointer,
    pub paths: Vec<String>,
}

/// The pointers a push introduces, chosen as git-lfs chooses them: objects
/// reachable from the pushed commits and not from what `remote` already has.
/// `updates` is what git gives the pre-push hook on its standard input:
/// `<local ref> <local sha> <remote ref> <remote sha>` lines.
pub fn pushed_pointers(repo: &Path, remote: &str, updates: &str) -> Result<Vec<Pushed>, ScanError> {
    let mut args: Vec<String> = vec![
        "rev-list".into(),
        "--objects".into(),
        format!("--filter=blob:limit={MAX_POINTER_SIZE}"),
    ];
    let mut any = false;
    for line in updates.lines() {
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        let [_, local, _, theirs] = fields[..] else {
            continue;
        };
        if is_zero(local) {
            continue; // a deletion sends nothing
        }
        any = true;
        args.push(local.to_string());
        if !is_zero(theirs) && object_exists(repo, theirs)? {
            args.push(format!("^{theirs}"));
        }
    }
    if !any {
        return Ok(Vec::new());
    }
    args.push("--not".into());
    args.push(format!("--remotes={remote}"));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(repo, &argv)?;
    if !out.status.success() {
        return Err(git_failed(repo, &argv[..3], &out.stderr));
    }
    let mut paths: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some((id, path)) = line.split_once(' ').filter(|(_, p)| !p.is_empty()) {
            paths
                .entry(id.to_string())
                .or_default()
                .push(path.to_string());
        }
    }
    let blobs = small_blob_ids(repo, paths.keys())?;
    let mut by_oid: BTreeMap<Oid, Pushed> = BTreeMap::new();
    for (id, pointer) in read_pointers(repo, &blobs)? {
        let entry = by_oid.entry(pointer.oid).or_insert_with(|| Pushed {
            pointer,
            paths: Vec::new(),
        });
        entry.paths.extend(paths.remove(&id).unwrap_or_default());
    }
    Ok(by_oid.into_values().collect())
}

fn is_zero(sha: &str) -> bool {
    sha.bytes().all(|b| b == b'0')
}

fn object_exists(repo: &Path, sha: &str) -> Result<bool, ScanError> {
    Ok(run(repo, &["cat-file", "-e", sha])?.status.success())
}

/// Of `ids`, the blobs small enough to be pointers, through one
/// `git cat-file --batch-check`.
pub(crate) fn small_blob_ids<'a>(
    repo: &Path,
    ids: impl Iterator<Item = &'a String>,
) -> Result<Vec<String>, ScanError> {
    let args = ["cat-file", "--batch-check"];
    let fail = |why: String| ScanError::Git {
        repo: repo.to_path_buf(),
        args: args.join(" "),
        why,
    };
    let input: String = ids.map(|id| format!("{id}\n")).collect();
    let (child, feeder) = spawn_fed(repo, &args, input).map_err(|e| fail(e.to_string()))?;
    let out = child
        .wait_with_output()
        .map_err(|e| fail(format!("reading its output: {e}")))?;
    let _ = feeder.join();
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .filter_map(|line| {
            let mut f = line.split_ascii_whitespace();
            let (id, kind, size) = (f.next()?, f.next()?, f.next()?.parse::<u64>().ok()?);
            (kind == "blob" && size < MAX_POINTER_SIZE).then(|| id.to_string())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::Oid;

    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    fn commit_pointer(top: &Path, name: &str, content: &[u8]) -> Pointer {
        let pointer = Pointer {
            oid: Oid::of(content),
            size: content.len() as u64,
        };
        std::fs::write(top.join(name), pointer.to_text()).unwrap();
        git(top, &["add", name]);
        git(
            top,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                name,
            ],
        );
        pointer
    }

    #[test]
    fn a_rescan_of_the_same_head_reuses_its_pointers_and_a_new_head_is_read_again() {
        let tmp = tempfile::tempdir().unwrap();
        let pool = Pool::open(&tmp.path().join("pool"), Some(1024)).unwrap();
        let top = tmp.path().join("repo");
        std::fs::create_dir(&top).unwrap();
        git(&top, &["init", "-q"]);
        let first = commit_pointer(&top, "a.bin", b"first");
        let dirs = Repo::locate(&top).unwrap();
        let mut known = HeadPointers::default();
        let scan = scan_in(&top, &dirs, &pool, &mut known).unwrap();
        assert_eq!((scan.pointers, scan.absent), (1, 1));
        assert_eq!(known.last.as_ref().unwrap().1, [first]);

        // What is known for this HEAD is what counts: the tree is not read.
        let head = known.last.as_ref().unwrap().0.clone();
        known.last = Some((head, Vec::new()));
        let again = scan_in(&top, &dirs, &pool, &mut known).unwrap();
        assert_eq!(again.pointers, 0);

        commit_pointer(&top, "b.bin", b"second");
        let moved = scan_in(&top, &dirs, &pool, &mut known).unwrap();
        assert_eq!((moved.pointers, moved.absent), (2, 2));
        assert_ne!(moved.head, again.head);
    }
}
