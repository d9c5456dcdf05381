//! Checking out a repo's Git LFS files from the pool, without git holding
//! each one in memory.
//!
//! git checks a file out through a smudge filter by reading the filter's
//! whole output into memory before it writes the file: for a 512 MiB
//! object that is half a GiB of memory and seconds of page faults and
//! copies (`drsctl clone` spent most of its time there). So `drsctl clone`
//! has git check the pointer files out as they are (`GIT_LFS_SKIP_SMUDGE`),
//! and [`check_out`] then replaces each with its object, copied from the
//! pool (checked against its oid on the way out), through a temp file and
//! a rename in the file's own folder ([`safe_write`]).
//!
//! git must still learn that the new files match its index. Their index
//! entries are first re-added without stat data (`update-index
//! --index-info`), which makes git compare content for them: until their
//! stat data is recorded (`drsctl clone` has git refresh the index through
//! `drs-hook filter-process`, which hashes them, but for the large files
//! whose [`FileStamp`]s, taken as they were written, still match), `git
//! status` cleans and compares each. So a kill at any point leaves a repo git reads right:
//! each file is the pointer or the whole object, and either cleans to the
//! pointer in the index.
//!
//! Only a file that is exactly the pointer's canonical text (what git-lfs's
//! clean writes back) is replaced: for any other pointer text the refreshed
//! entry would not match and git would call the file modified. Those, and
//! objects the pool cannot give, are removed for git-lfs to check out the
//! usual way ([`CheckedOut::to_git`]).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::BufReader;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Stdio;

use crate::git::Repo;
use crate::pool::Pool;
use crate::safe_write::{self, Mode};
use drsd_proto::FileStamp;

use super::pointer::{Pointer, MAX_POINTER_SIZE};
use super::scan::{git_failed, read_batch_entry, ScanError};

/// An index entry whose blob is a Git LFS pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexPointer {
    /// As git names it: relative to the top, `/`-separated, any bytes.
    pub path: Vec<u8>,
    /// `100644` or `100755`, as git writes it.
    pub mode: String,
    pub blob: String,
    pub pointer: Pointer,
    /// The blob is the pointer's canonical text.
    pub canonical: bool,
}

impl IndexPointer {
    fn rel(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.path))
    }
}

/// What [`check_out`] did.
#[derive(Debug, Default)]
pub struct CheckedOut {
    /// Files replaced by their objects, and their bytes.
    pub written: u64,
    pub bytes: u64,
    /// Pointer files removed for git-lfs to check out (git paths, UTF-8).
    pub to_git: Vec<String>,
    /// Files left as they are, and why.
    pub left: Vec<(String, String)>,
    /// The written files of [`STAMPED_FROM`] bytes or more, stamped.
    pub stamps: Vec<FileStamp>,
}

/// The size from which a written file is stamped: below it, hashing the
/// file again in the index refresh costs less than the stamp's own stat.
pub const STAMPED_FROM: u64 = 1 << 20;

/// The stage-0 regular files of the index whose blobs are LFS pointers.
pub fn index_pointers(repo: &Path) -> Result<Vec<IndexPointer>, ScanError> {
    let args = ["ls-files", "-s", "-z"];
    let out = crate::git::output(repo, &args)?;
    if !out.status.success() {
        return Err(git_failed(repo, &args, &out.stderr));
    }
    let entries: Vec<(String, String, Vec<u8>)> = out
        .stdout
        .split(|b| *b == 0)
        .filter_map(index_entry)
        .collect();
    let mut ids: Vec<&str> = entries.iter().map(|(_, id, _)| id.as_str()).collect();
    ids.sort();
    ids.dedup();
    let blobs = small_blobs(repo, &ids)?;
    Ok(entries
        .into_iter()
        .filter_map(|(mode, blob, path)| {
            let text = blobs.get(&blob)?;
            let pointer = Pointer::parse(text).ok()?;
            let canonical = pointer.to_text().as_bytes() == text.as_slice();
            Some(IndexPointer {
                path,
                mode,
                blob,
                pointer,
                canonical,
            })
        })
        .collect())
}

/// `<mode> SP <id> SP <stage> TAB <path>` of a regular file at stage 0.
fn index_entry(entry: &[u8]) -> Option<(String, String, Vec<u8>)> {
    let tab = entry.iter().position(|b| *b == b'\t')?;
    let meta = std::str::from_utf8(&entry[..tab]).ok()?;
    let mut fields = meta.split(' ');
    let (mode, id, stage) = (fields.next()?, fields.next()?, fields.next()?);
    let regular = mode == "100644" || mode == "100755";
    (regular && stage == "0").then(|| (mode.to_string(), id.to_string(), entry[tab + 1..].to_vec()))
}

/// The content of those of `ids` that are blobs small enough to be
/// pointers: sizes through one `cat-file --batch-check`, content through
/// one `cat-file --batch`.
fn small_blobs(repo: &Path, ids: &[&str]) -> Result<BTreeMap<String, Vec<u8>>, ScanError> {
    let input: String = ids.iter().map(|id| format!("{id}\n")).collect();
    let checked = run_fed(repo, &["cat-file", "--batch-check"], input.into_bytes())?;
    let checked = String::from_utf8_lossy(&checked);
    let small: Vec<&str> = checked
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let (id, kind, size) = (fields.next()?, fields.next()?, fields.next()?);
            let size: u64 = size.parse().ok()?;
            (kind == "blob" && size < MAX_POINTER_SIZE).then_some(id)
        })
        .collect();
    let args = ["cat-file", "--batch"];
    let input: String = small.iter().map(|id| format!("{id}\n")).collect();
    let (mut child, feeder) = crate::git::spawn_fed(repo, &args, input.into_bytes(), Stdio::null())
        .map_err(|e| git_failed(repo, &args, e.to_string().as_bytes()))?;
    let mut out = BufReader::new(child.stdout.take().expect("stdout is piped"));
    let mut blobs = BTreeMap::new();
    for id in small {
        let body = read_batch_entry(&mut out)
            .map_err(|e| git_failed(repo, &args, format!("reading blob {id}: {e}").as_bytes()))?;
        if let Some(body) = body {
            blobs.insert(id.to_string(), body);
        }
    }
    let _ = feeder.join();
    let _ = child.wait();
    Ok(blobs)
}

/// Runs `git args` in `repo` with `input` on its standard input; its output,
/// or an error with what git said.
fn run_fed(repo: &Path, args: &[&str], input: Vec<u8>) -> Result<Vec<u8>, ScanError> {
    let (child, feeder) = crate::git::spawn_fed(repo, args, input, Stdio::piped())
        .map_err(|e| git_failed(repo, args, e.to_string().as_bytes()))?;
    let out = child
        .wait_with_output()
        .map_err(|e| git_failed(repo, args, e.to_string().as_bytes()))?;
    let _ = feeder.join();
    if !out.status.success() {
        return Err(git_failed(repo, args, &out.stderr));
    }
    Ok(out.stdout)
}

/// Replaces the pointer files of `entries` in `repo`'s work tree with their
/// objects from `pool` (see the module doc). A file that is not the pointer
/// git checked out (changed since, or not there) is left alone.
pub fn check_out(
    repo: &Repo,
    pool: &Pool,
    entries: &[IndexPointer],
) -> Result<CheckedOut, ScanError> {
    let mut done = CheckedOut::default();
    let (mut fill, mut to_git) = (Vec::new(), Vec::new());
    for entry in entries {
        match checked_out_as_pointer(&repo.top, entry) {
            Err(why) => done.left.push((lossy(entry), why.to_string())),
            Ok(()) if !entry.canonical => to_git.push(entry),
            Ok(()) => match pool.size(&entry.pointer.oid) {
                Ok(Some(size)) if size == entry.pointer.size => fill.push(entry),
                _ => to_git.push(entry),
            },
        }
    }
    forget_stat(&repo.top, &fill)?;
    for entry in fill {
        match fill_from_pool(&repo.top, pool, entry) {
            Ok(meta) => {
                done.written += 1;
                done.bytes += entry.pointer.size;
                let path = std::str::from_utf8(&entry.path).ok();
                if let Some(path) = path.filter(|_| entry.pointer.size >= STAMPED_FROM) {
                    let stamp = FileStamp::new(path.to_string(), &entry.pointer, &meta);
                    done.stamps.push(stamp);
                }
            }
            Err(e) => {
                log::warn!("{}: {e}; git-lfs checks it out instead", lossy(entry));
                to_git.push(entry);
            }
        }
    }
    for entry in to_git {
        match remove(&repo.top, entry) {
            Ok(path) => done.to_git.push(path),
            Err(why) => done.left.push((lossy(entry), why.to_string())),
        }
    }
    Ok(done)
}

/// Why a work tree file was left as it is, for git-lfs (or the user) to
/// check out: the reason [`CheckedOut::left`] gives beside its path.
#[derive(Debug, thiserror::Error)]
enum LeftAlone {
    #[error(transparent)]
    Unsafe(#[from] safe_write::SafeWriteError),
    #[error("it is not the pointer file git checked out")]
    NotThePointer,
    #[error("cannot look at it: {0}")]
    CannotLook(std::io::Error),
    #[error("cannot read it: {0}")]
    CannotRead(std::io::Error),
    #[error("left as a pointer: its name is not UTF-8; run `git lfs checkout`")]
    NotUtf8,
    #[error("cannot remove it: {0}")]
    CannotRemove(std::io::Error),
}

/// Why an object could not be written over its pointer file from the
/// pool (git-lfs checks it out instead).
#[derive(Debug, thiserror::Error)]
enum Unfilled {
    #[error("the pool gave {given} bytes of {size}")]
    Short { given: u64, size: u64 },
    #[error("the pool no longer holds it")]
    Gone,
    #[error(transparent)]
    Pool(crate::pool::PoolError),
    #[error(transparent)]
    Write(safe_write::SafeWriteError),
}

/// Whether the work tree's file is a regular file holding the entry's
/// pointer (what `GIT_LFS_SKIP_SMUDGE` checks out), with no symlink on the
/// way: a file that is anything else is not ours to replace.
fn checked_out_as_pointer(top: &Path, entry: &IndexPointer) -> Result<(), LeftAlone> {
    let rel = entry.rel();
    safe_write::check_dirs(top, rel.parent().unwrap_or(Path::new("")))?;
    let path = top.join(rel);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() && m.len() < MAX_POINTER_SIZE => {}
        Ok(_) => return Err(LeftAlone::NotThePointer),
        Err(e) => return Err(LeftAlone::CannotLook(e)),
    }
    let bytes = std::fs::read(&path).map_err(LeftAlone::CannotRead)?;
    match Pointer::parse(&bytes) {
        Ok(p) if p == entry.pointer => Ok(()),
        _ => Err(LeftAlone::NotThePointer),
    }
}

/// Re-adds the entries to the index without stat data, so git compares
/// their content until their stat data is recorded again.
fn forget_stat(top: &Path, entries: &[&IndexPointer]) -> Result<(), ScanError> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut input = Vec::new();
    for e in entries {
        input.extend_from_slice(format!("{} {}\t", e.mode, e.blob).as_bytes());
        input.extend_from_slice(&e.path);
        input.push(0);
    }
    run_fed(top, &["update-index", "-z", "--index-info"], input)?;
    Ok(())
}

/// The object over its pointer file, keeping the file's permission bits;
/// the file's stat data once written. The pool checks the object against
/// its oid on the way out (or knows it did since the entry last changed).
fn fill_from_pool(
    top: &Path,
    pool: &Pool,
    entry: &IndexPointer,
) -> Result<std::fs::Metadata, Unfilled> {
    let (oid, size) = (entry.pointer.oid, entry.pointer.size);
    let mut why = None;
    let written = safe_write::write_with(top, entry.rel(), Mode::WORK_TREE, |file| {
        let problem = match pool.copy_into(&oid, file) {
            Ok(Some(n)) if n == size => return Ok(()),
            Ok(Some(given)) => Unfilled::Short { given, size },
            Ok(None) => Unfilled::Gone,
            Err(e) => Unfilled::Pool(e),
        };
        why = Some(problem);
        Err(std::io::Error::other("the pool did not give it"))
    });
    match (written, why) {
        (Ok(meta), _) => Ok(meta),
        (Err(_), Some(why)) => Err(why),
        (Err(e), None) => Err(Unfilled::Write(e)),
    }
}

/// Removes a pointer file [`checked_out_as_pointer`] found, for git to
/// write again; its git path. A name that is not UTF-8 is kept, as a
/// pointer: it could not be named back to git.
fn remove(top: &Path, entry: &IndexPointer) -> Result<String, LeftAlone> {
    let Ok(path) = std::str::from_utf8(&entry.path) else {
        return Err(LeftAlone::NotUtf8);
    };
    std::fs::remove_file(top.join(entry.rel())).map_err(LeftAlone::CannotRemove)?;
    Ok(path.to_string())
}

fn lossy(entry: &IndexPointer) -> String {
    String::from_utf8_lossy(&entry.path).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::Oid;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn pointer_to(bytes: &[u8]) -> Pointer {
        Pointer {
            oid: Oid::of(bytes),
            size: bytes.len() as u64,
        }
    }

    #[test]
    fn canonical_pointers_the_pool_holds_are_filled_the_rest_go_to_git_and_changed_files_stay() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool::open(&dir.path().join("pool"), Some(1024)).unwrap();
        let (big, small) = (vec![3u8; 4096], b"tiny".to_vec());
        pool.put(&Oid::of(&big), &big).unwrap();
        pool.put(&Oid::of(&small), &small).unwrap();
        let top = dir.path().join("repo");
        std::fs::create_dir_all(top.join("sub")).unwrap();
        git(&top, &["init", "-q"]);
        let text = |b: &[u8]| pointer_to(b).to_text();
        let files = [
            ("sub/exec.bin", text(&big)),
            ("small.bin", text(&small)),
            ("crlf.bin", text(&big).replace('\n', "\r\n")),
            ("absent.bin", text(b"nowhere")),
            ("changed.bin", text(&big)),
        ];
        for (name, text) in &files {
            std::fs::write(top.join(name), text).unwrap();
        }
        let exec = top.join("sub/exec.bin");
        std::fs::set_permissions(&exec, std::fs::Permissions::from_mode(0o755)).unwrap();
        git(&top, &["add", "-A"]);
        std::fs::write(top.join("changed.bin"), "the user's own words\n").unwrap();

        let repo = Repo::locate(&top).unwrap();
        let entries = index_pointers(&repo.top).unwrap();
        assert_eq!(entries.len(), files.len(), "{entries:?}");
        let done = check_out(&repo, &pool, &entries).unwrap();

        assert_eq!((done.written, done.bytes), (2, 4096 + 4));
        assert_eq!(std::fs::read(&exec).unwrap(), big);
        let mode = std::fs::metadata(&exec).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "the executable bit is kept");
        assert_eq!(std::fs::read(top.join("small.bin")).unwrap(), small);
        let mut to_git = done.to_git.clone();
        to_git.sort();
        assert_eq!(to_git, ["absent.bin", "crlf.bin"]);
        for gone in to_git {
            assert!(!top.join(&gone).exists(), "{gone} is removed for git-lfs");
        }
        let left: Vec<&str> = done.left.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(left, ["changed.bin"]);
        assert_eq!(
            std::fs::read_to_string(top.join("changed.bin")).unwrap(),
            "the user's own words\n"
        );
        // The filled entries carry no stat data: git compares their content.
        let debug = git(&top, &["ls-files", "--debug", "--", "sub/exec.bin"]);
        assert!(debug.contains("size: 0"), "{debug}");
        let debug = git(&top, &["ls-files", "--debug", "--", "changed.bin"]);
        assert!(!debug.contains("size: 0"), "{debug}");
    }

    #[test]
    fn a_pointer_behind_a_symlinked_folder_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool::open(&dir.path().join("pool"), Some(1024)).unwrap();
        let big = vec![4u8; 4096];
        pool.put(&Oid::of(&big), &big).unwrap();
        let (top, outside) = (dir.path().join("repo"), dir.path().join("outside"));
        std::fs::create_dir_all(top.join("d")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        git(&top, &["init", "-q"]);
        std::fs::write(top.join("d/x.bin"), pointer_to(&big).to_text()).unwrap();
        git(&top, &["add", "-A"]);
        // The folder is swapped for a link out of the repo after git wrote it.
        std::fs::rename(top.join("d/x.bin"), outside.join("x.bin")).unwrap();
        std::fs::remove_dir(top.join("d")).unwrap();
        std::os::unix::fs::symlink(&outside, top.join("d")).unwrap();

        let repo = Repo::locate(&top).unwrap();
        let done = check_out(&repo, &pool, &index_pointers(&repo.top).unwrap()).unwrap();
        assert_eq!(
            (done.written, done.to_git.len(), done.left.len()),
            (0, 0, 1)
        );
        assert!(done.left[0].1.contains("symbolic link"), "{:?}", done.left);
        assert_eq!(
            std::fs::read_to_string(outside.join("x.bin")).unwrap(),
            pointer_to(&big).to_text()
        );
    }
}
