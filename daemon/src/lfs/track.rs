//! Making paths LFS-tracked and staging them, the way `git lfs track PATH`
//! and `git add PATH` would, with one git process per step for any number
//! of paths.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Stdio;

use crate::safe_write::{self, Mode, SafeWriteError};
use crate::IoError;

/// The attributes `git lfs track` writes.
pub const LFS_ATTRIBUTES: &str = "filter=lfs diff=lfs merge=lfs -text";

#[derive(Debug, thiserror::Error)]
pub enum TrackError {
    #[error("{what} in {repo}: {why}")]
    Git {
        what: &'static str,
        repo: std::path::PathBuf,
        why: String,
    },
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Write(#[from] SafeWriteError),
    #[error("{path:?} cannot be tracked: {why}")]
    Unexpressible { path: String, why: &'static str },
}

/// What the attributes of a path say, as far as adding a pointer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathAttrs {
    /// `filter=lfs`: tracked already.
    pub lfs: bool,
    /// No filter, `working-tree-encoding` or `ident`: git stores the file's
    /// bytes as they are.
    pub plain: bool,
    /// No `working-tree-encoding` or `ident`, and no filter but git-lfs's
    /// (whose clean filter passes a pointer through): git stores a pointer
    /// file's bytes as they are, so it may be staged with
    /// [`Convert::AsIs`].
    pub pointer_as_is: bool,
}

/// How [`stage`] lets git convert the files it stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Convert {
    /// As `git add` would: each path's attributes apply.
    ByAttributes,
    /// The files are pointers whose attributes change nothing (see
    /// [`PathAttrs::pointer_as_is`]): git is told to read attributes from
    /// the empty tree (`GIT_ATTR_SOURCE`, git 2.40 and later; older ones
    /// ignore it), which stores the same blobs and spares it matching each
    /// path against every `.gitattributes` line. add-url writes a line per
    /// path: with 10,000 of them, staging 1,000 pointers took git 0.8 s
    /// instead of 0.02 s, and each add-url batch and each promotion batch
    /// paid it, so 10,000 objects cost quadratic time.
    AsIs,
}

const ASKED: [&str; 3] = ["filter", "working-tree-encoding", "ident"];

/// The attributes of each repo-relative path (one `git check-attr`), as
/// git gives them in the repo's work tree. git matches each path against
/// every line of every `.gitattributes` on its way; add-url writes a line
/// per path, so in a repo that holds 10,000 of them each batch of 1,000
/// cost git 0.13 s, and adding 10,000 objects grew as their square. So
/// when the lines drsd wrote are all in the top `.gitattributes`, git is
/// asked in a private scratch work tree whose `.gitattributes` is the top
/// one less drsd's lines that name none of `paths` ([`Unrelated`]): lines
/// that match none of the paths asked change none of their attributes.
pub fn attributes(top: &Path, paths: &[&str]) -> Result<Vec<PathAttrs>, TrackError> {
    match Unrelated::drop_from(top, paths)? {
        Some(view) => check_attr(top, Some(&view), paths),
        None => check_attr(top, None, paths),
    }
}

/// [`attributes`], always asked in the work tree itself: what the scratch
/// view must agree with.
#[cfg(test)]
pub(crate) fn attributes_in_work_tree(
    top: &Path,
    paths: &[&str],
) -> Result<Vec<PathAttrs>, TrackError> {
    check_attr(top, None, paths)
}

fn check_attr(
    top: &Path,
    view: Option<&Unrelated>,
    paths: &[&str],
) -> Result<Vec<PathAttrs>, TrackError> {
    let mut args = vec!["check-attr", "-z", "--stdin"];
    args.extend(ASKED);
    let out = match view {
        None => run_with_input(top, &args, paths, "git check-attr")?,
        Some(view) => {
            let mut cmd = crate::git::git(view.dir.path());
            cmd.arg("--git-dir").arg(&view.git_dir);
            cmd.arg("--work-tree").arg(view.dir.path()).args(&args);
            run_fed(top, &mut cmd, nul_separated(paths), "git check-attr")?
        }
    };
    // -z output: path NUL attribute NUL value NUL, per path in input order,
    // per attribute in the order asked.
    let values: Vec<&[u8]> = out
        .split(|b| *b == 0)
        .collect::<Vec<_>>()
        .chunks(3)
        .filter(|c| c.len() == 3)
        .map(|c| c[2])
        .collect();
    if values.len() != paths.len() * ASKED.len() {
        let why = format!("answered {} values for {} paths", values.len(), paths.len());
        return Err(git_err(top, "git check-attr", why));
    }
    let none = |x: &[u8]| x == b"unspecified" || x == b"unset";
    let attrs = values.chunks(ASKED.len()).map(|v| PathAttrs {
        lfs: v[0] == b"lfs",
        plain: v.iter().all(|x| *x == b"unspecified"),
        pointer_as_is: (none(v[0]) || v[0] == b"lfs") && none(v[1]) && none(v[2]),
    });
    Ok(attrs.collect())
}

/// A private scratch work tree for [`attributes`]: the repo's top
/// `.gitattributes` without the lines drsd wrote ([`own_line`]) for paths
/// other than those asked, and the repo's git folder.
struct Unrelated {
    dir: tempfile::TempDir,
    git_dir: std::path::PathBuf,
}

impl Unrelated {
    /// The view, or `None` where it would not be the same as the work
    /// tree for `paths` or would save nothing: a `.gitattributes` in a
    /// folder on the way to one of them (git reads it; the view would
    /// not), no top `.gitattributes`, or none of drsd's lines to drop.
    /// Where the work tree has no `.gitattributes` in a folder, git reads
    /// the index's, in the view as in the work tree.
    fn drop_from(top: &Path, paths: &[&str]) -> Result<Option<Unrelated>, TrackError> {
        if paths.iter().any(|p| nested_attributes(top, p)) {
            return Ok(None);
        }
        let Some(bytes) = read_attributes(&top.join(".gitattributes"))? else {
            return Ok(None);
        };
        let Ok(text) = std::str::from_utf8(&bytes) else {
            return Ok(None);
        };
        // With core.ignoreCase git matches patterns without case: a line
        // naming an asked path in another case is kept too.
        let asked: std::collections::HashSet<String> =
            paths.iter().map(|p| p.to_lowercase()).collect();
        let mut kept = String::with_capacity(text.len());
        let mut dropped = 0;
        for line in text.split_inclusive('\n') {
            match own_line(line) {
                Some(path) if !asked.contains(&path.to_lowercase()) => dropped += 1,
                _ => kept.push_str(line),
            }
        }
        if dropped == 0 {
            return Ok(None);
        }
        let dir = tempfile::Builder::new()
            .prefix("drsd-attributes-")
            .tempdir()
            .map_err(IoError::at(
                "create a scratch folder in",
                &std::env::temp_dir(),
            ))?;
        let file = dir.path().join(".gitattributes");
        std::fs::write(&file, kept).map_err(IoError::at("write", &file))?;
        let out = run_with_bytes(
            top,
            &["rev-parse", "--absolute-git-dir"],
            Vec::new(),
            "git rev-parse",
        )?;
        let git_dir = out.strip_suffix(b"\n").unwrap_or(&out);
        let git_dir = std::ffi::OsStr::from_bytes(git_dir).into();
        Ok(Some(Unrelated { dir, git_dir }))
    }
}

/// Whether a folder on the way to `path` (not the top) has a
/// `.gitattributes` in the work tree, of any kind.
fn nested_attributes(top: &Path, path: &str) -> bool {
    let mut at = top.to_path_buf();
    let Some((folders, _)) = path.rsplit_once('/') else {
        return false;
    };
    folders.split('/').any(|folder| {
        at.push(folder);
        std::fs::symlink_metadata(at.join(".gitattributes")).is_ok()
    })
}

/// The path a top `.gitattributes` line names if it is exactly a line
/// [`append_lines`] writes: the [`literal`] pattern of an expressible path
/// and [`LFS_ATTRIBUTES`]. Such a line matches that path and no other.
fn own_line(line: &str) -> Option<String> {
    let pattern = line.strip_suffix('\n')?.strip_suffix(LFS_ATTRIBUTES)?;
    let pattern = pattern.strip_suffix(' ')?;
    let mut path = String::with_capacity(pattern.len());
    let mut rest = pattern.strip_prefix('/')?;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("[[:space:]]") {
            path.push(' ');
            rest = after;
        } else if c == '\\' {
            let escaped = rest[1..].chars().next()?;
            path.push(escaped);
            rest = &rest[1 + escaped.len_utf8()..];
        } else {
            path.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    (check_expressible(&path).is_ok() && literal(&path) == pattern).then_some(path)
}

/// For each repo-relative path, whether its `filter` attribute is `lfs`.
pub fn tracked(top: &Path, paths: &[&str]) -> Result<Vec<bool>, TrackError> {
    Ok(attributes(top, paths)?.iter().map(|a| a.lfs).collect())
}

/// Makes the pointer files at `paths` LFS-tracked and stages them (and
/// `.gitattributes`), ending where `git lfs track PATH...` then
/// `git add PATH...` would; returns how many `.gitattributes` lines it added.
///
/// Paths without any filter yet are staged before their lines are written:
/// their blob is the pointer text either way (git-lfs's clean filter passes
/// a pointer through unchanged), and git then skips matching each of 10,000
/// paths against 10,000 new patterns, which takes it seconds. Paths with
/// some filter already are staged after the lines are written.
pub fn track_and_stage(top: &Path, paths: &[&str]) -> Result<usize, TrackError> {
    // Read, and checked, before git reads it: git waits forever on a FIFO
    // planted there.
    let existing = read_attributes(&top.join(".gitattributes"))?;
    let mut asked = paths.to_vec();
    asked.push(".gitattributes");
    let mut attrs = attributes(top, &asked)?;
    // `attributes` answers every path asked, or fails.
    let own_plain = attrs.pop().is_some_and(|a| a.plain);
    let pick = |want: fn(&PathAttrs) -> bool| -> Vec<&str> {
        let both = paths.iter().zip(&attrs);
        both.filter(|(_, a)| want(a)).map(|(p, _)| *p).collect()
    };
    let untracked = pick(|a| !a.lfs);
    let (early, mut later) = if paths.len() < PACK_FROM {
        // Few paths: matching them against new lines costs nothing, and one
        // staging command is cheaper than two.
        (Vec::new(), paths.to_vec())
    } else {
        pack_blobs(top, paths)?;
        (pick(|a| a.plain), pick(|a| !a.plain))
    };
    // Plain paths' blobs are their bytes whatever lines come: staged as
    // they are, before the lines (git < 2.40 matches them against fewer).
    stage(top, &early, Convert::AsIs)?;
    append_lines(top, existing.as_deref(), &untracked)?;
    // Whether the last staging may skip attributes too: every pointer in
    // it as is, and `.gitattributes` given no filter, encoding or ident by
    // any line (the new ones name the pointers' paths alone) and holding
    // no CR that a `text` attribute would take out. Staging it makes git
    // re-check the entries staged in the same second ("racily clean"),
    // each by its attributes: against 10,000 lines, a tenth of a second or
    // more per add-url batch, growing with the repo.
    let later_as_is = attrs.iter().all(|a| a.pointer_as_is)
        && own_plain
        && !paths.contains(&".gitattributes")
        && !existing.is_some_and(|bytes| bytes.contains(&b'\r'));
    if !untracked.is_empty() {
        later.push(".gitattributes");
    }
    let convert = match later_as_is {
        true => Convert::AsIs,
        false => Convert::ByAttributes,
    };
    stage(top, &later, convert)?;
    Ok(untracked.len())
}

/// The most of a `.gitattributes` git reads (`ATTR_MAX_FILE_SIZE`).
const MAX_ATTRIBUTES_FILE: u64 = 100 << 20;

/// The bytes of the top `.gitattributes`, `None` when there is none. A
/// cloned repo may have planted anything there: it is opened without
/// following a link and without waiting on a FIFO, and must be a regular
/// file no larger than git reads.
fn read_attributes(file: &Path) -> Result<Option<Vec<u8>>, IoError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |why: &str| {
        let source = std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string());
        IoError::new("read", file.to_path_buf(), source)
    };
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(file);
    let f = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(fail("a symbolic link, not a file"))
        }
        Err(source) => return Err(IoError::new("read", file.to_path_buf(), source)),
    };
    let meta = f.metadata().map_err(IoError::at("read", file))?;
    if !meta.is_file() {
        return Err(fail("not a regular file"));
    }
    let mut bytes = Vec::new();
    f.take(MAX_ATTRIBUTES_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(IoError::at("read", file))?;
    if bytes.len() as u64 > MAX_ATTRIBUTES_FILE {
        return Err(fail("larger than the 100 MiB git reads"));
    }
    Ok(Some(bytes))
}

/// Appends a `PATTERN filter=lfs ...` line to the top `.gitattributes`,
/// whose bytes are `existing` ([`read_attributes`]), for each of `paths`
/// (temp file and rename: never half-written).
fn append_lines(top: &Path, existing: Option<&[u8]>, paths: &[&str]) -> Result<(), TrackError> {
    if paths.is_empty() {
        return Ok(());
    }
    let bytes = existing.unwrap_or_default();
    let mut text = String::from_utf8(bytes.to_vec()).map_err(|e| {
        let source = std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error());
        IoError::new("read", top.join(".gitattributes"), source)
    })?;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    for path in paths {
        text.push_str(&format!("{} {LFS_ATTRIBUTES}\n", pattern(path)?));
    }
    replace(top, ".gitattributes", text.as_bytes())
}

/// Stages the pointer files at `paths` as `git add` would, with one `git
/// update-index --add --stdin`: no pathspec matching (which costs `git add`
/// seconds for 10,000 paths: each is matched against every pathspec).
pub(crate) fn stage(top: &Path, paths: &[&str], convert: Convert) -> Result<(), TrackError> {
    if paths.is_empty() {
        return Ok(());
    }
    let attr_source = match convert {
        Convert::AsIs => Some(empty_tree(top)?),
        Convert::ByAttributes => None,
    };
    // git-lfs's clean filter passes a pointer through unchanged, so staging
    // with it switched off stores the same blob; it also keeps git from
    // starting `git-lfs filter-process` (tens of ms) to re-check index
    // entries staged in the same second ("racily clean" ones).
    let update = || {
        let mut cmd = index_update(top, &["--add", "-z", "--stdin"]);
        if let Some(tree) = &attr_source {
            cmd.env("GIT_ATTR_SOURCE", tree);
        }
        run_fed(top, &mut cmd, nul_separated(paths), "git update-index")
    };
    waiting_for_the_index(update)
}

/// Refreshes the stat data of the index's entries, as `git status` would
/// on its first run, with git-lfs's clean filter off: a staged pointer
/// whose file holds that pointer is found unchanged by its bytes alone
/// (what the filter would answer, at a git-lfs start per file), and any
/// other file is left as it was, for the next `git status` to look at.
/// Run a second after a promotion rewrote files: entries staged in the
/// same second as their files were written are "racily clean", and git
/// re-reads each of them, through git-lfs, until the index is written
/// again (11 s at 100,000 pointers).
pub(crate) fn refresh_index(top: &Path) -> Result<(), TrackError> {
    waiting_for_the_index(|| {
        let mut cmd = index_update(top, &["-q", "--refresh"]);
        run_fed(top, &mut cmd, Vec::new(), "git update-index --refresh")
    })
}

/// `git update-index ARGS` in `top` with git-lfs's filter switched off.
fn index_update(top: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = crate::git::git(top);
    cmd.args([
        "-c",
        "filter.lfs.process=",
        "-c",
        "filter.lfs.clean=",
        "-c",
        "filter.lfs.required=false",
        "update-index",
    ]);
    cmd.args(args);
    cmd
}

/// `run` once it gets the index: another git in the repo (the user's, or
/// one left running by a killed daemon) may hold it for a moment, which is
/// waited for, a little (50 tries, 100 ms apart).
fn waiting_for_the_index<T>(run: impl Fn() -> Result<T, TrackError>) -> Result<(), TrackError> {
    for _ in 0..50 {
        match run() {
            Err(TrackError::Git { why, .. }) if why.contains("index.lock") => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            done => return done.map(|_| ()),
        }
    }
    run().map(|_| ())
}

/// The empty tree's id in the repo's object format (SHA-1 or SHA-256).
fn empty_tree(top: &Path) -> Result<&'static str, TrackError> {
    let out = run_with_bytes(
        top,
        &["rev-parse", "--show-object-format"],
        Vec::new(),
        "git rev-parse",
    )?;
    match String::from_utf8_lossy(&out).trim() {
        "sha1" => Ok("4b825dc642cb6eb9a060e54bf8d69288fbee4904"),
        "sha256" => Ok("6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"),
        other => Err(git_err(
            top,
            "git rev-parse",
            format!("object format {other:?}"),
        )),
    }
}

/// `path` as a gitattributes pattern matching exactly it and nothing else
/// (as git lfs track writes a literal name): anchored at the top with a
/// leading `/` (a pattern without a slash would match the name in every
/// folder, and this also keeps a leading `#`, `!` or `"` from making a
/// comment, a negation or a quoted pattern), glob characters escaped,
/// spaces as `[[:space:]]` (a line is split at blanks, and a backslash
/// does not stop that). `[[:space:]]` matches no other character of an
/// accepted path: [`check_expressible`] refuses control characters.
pub fn pattern(path: &str) -> Result<String, TrackError> {
    check_expressible(path)?;
    Ok(literal(path))
}

/// The pattern text of `path`, unchecked.
fn literal(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 8);
    out.push('/');
    for c in path.chars() {
        match c {
            ' ' => out.push_str("[[:space:]]"),
            '*' | '?' | '[' | ']' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Refuses a repo-relative path that a `.gitattributes` line cannot name
/// exactly: a newline or CR would end the line and start a stray pattern,
/// NUL cannot be written, and no other control character (tab, vertical
/// tab...) can be told from a space by `[[:space:]]`; and git ignores a
/// line of 2048 bytes or more (`attr.c`, `ATTR_MAX_LINE_LENGTH`).
pub fn check_expressible(path: &str) -> Result<(), TrackError> {
    let why = if path.is_empty() {
        "it is empty"
    } else if path.starts_with('/') || path.ends_with('/') {
        "it is not a file path relative to the repo's top"
    } else if path.contains(['\n', '\r']) {
        "a .gitattributes line cannot hold a newline or carriage return"
    } else if path.contains('\0') {
        "it contains a NUL byte"
    } else if path.chars().any(char::is_control) {
        "a .gitattributes pattern cannot name a control character (tab and the like) exactly"
    } else if literal(path).len() + LFS_ATTRIBUTES.len() + 2 >= 2048 {
        "its .gitattributes line would be longer than git reads (2048 bytes)"
    } else {
        return Ok(());
    };
    Err(TrackError::Unexpressible {
        path: path.to_string(),
        why,
    })
}

/// Writes `bytes` to the repo-relative `rel` under `top` through
/// [`safe_write::write`]: a temp file created exclusively under a random
/// name beside it and a rename, so a reader (git) never sees half a file
/// and no symlink planted in the repo is ever followed.
pub fn replace(top: &Path, rel: &str, bytes: &[u8]) -> Result<(), TrackError> {
    Ok(safe_write::write(
        top,
        Path::new(rel),
        bytes,
        Mode::WORK_TREE,
    )?)
}

/// Runs git in `top` with `input` NUL-separated on its standard input, fed
/// from a thread so a long answer cannot block a long question.
pub(crate) fn run_with_input(
    top: &Path,
    args: &[&str],
    input: &[&str],
    what: &'static str,
) -> Result<Vec<u8>, TrackError> {
    run_with_bytes(top, args, nul_separated(input), what)
}

fn nul_separated(input: &[&str]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(input.iter().map(|p| p.len() + 1).sum());
    for p in input {
        bytes.extend_from_slice(p.as_bytes());
        bytes.push(0);
    }
    bytes
}

/// Runs git in `top` with `bytes` on its standard input, fed from a thread
/// so a long answer cannot block a long question.
fn run_with_bytes(
    top: &Path,
    args: &[&str],
    bytes: Vec<u8>,
    what: &'static str,
) -> Result<Vec<u8>, TrackError> {
    run_fed(top, crate::git::git(top).args(args), bytes, what)
}

/// Runs `cmd` (a [`crate::git::git`] in `top`) with `bytes` on its input.
fn run_fed(
    top: &Path,
    cmd: &mut std::process::Command,
    bytes: Vec<u8>,
    what: &'static str,
) -> Result<Vec<u8>, TrackError> {
    let (child, feeder) = crate::git::spawn_fed_with(cmd, bytes, Stdio::piped())
        .map_err(|e| git_err(top, what, format!("cannot run git: {e}")))?;
    let out = child
        .wait_with_output()
        .map_err(|e| git_err(top, what, e.to_string()))?;
    let fed = feeder.join().expect("the feeding thread does not panic");
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(git_err(top, what, why));
    }
    fed.map_err(|e| git_err(top, what, format!("writing its input: {e}")))?;
    Ok(out.stdout)
}

/// From this many paths on, their blobs go into one pack first.
const PACK_FROM: usize = 256;

/// Writes the blobs of the files at `paths` into one pack (`git
/// fast-import`), so staging them finds them stored already instead of
/// creating a loose object file each: on these machines a file creation
/// costs about half a millisecond, 5 s for 10,000 pointers.
fn pack_blobs(top: &Path, paths: &[&str]) -> Result<(), TrackError> {
    let mut stream = Vec::with_capacity(paths.len() * 160);
    for p in paths {
        let path = top.join(p);
        let bytes = std::fs::read(&path).map_err(IoError::at("read", &path))?;
        stream.extend_from_slice(format!("blob\ndata {}\n", bytes.len()).as_bytes());
        stream.extend_from_slice(&bytes);
        stream.push(b'\n');
    }
    // `--done`: a stream cut short stores nothing.
    stream.extend_from_slice(b"done\n");
    let mut cmd = crate::git::git_writing_many(top);
    cmd.args(["fast-import", "--quiet", "--done"]);
    run_fed(top, &mut cmd, stream, "git fast-import").map(|_| ())
}

fn git_err(top: &Path, what: &'static str, why: String) -> TrackError {
    TrackError::Git {
        what,
        repo: top.to_path_buf(),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `git version` as (major, minor).
    fn git_version() -> (u32, u32) {
        let out = Command::new("git").arg("version").output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut nums = text.split_whitespace().nth(2).unwrap().split('.');
        let mut next = || nums.next().unwrap().parse().unwrap();
        (next(), next())
    }

    /// The blob `git add` would store for `path` (its attributes applied).
    fn blob_of(top: &Path, path: &str) -> String {
        let out = git(top, &["hash-object", "--path", path, path]);
        out.trim().to_string()
    }

    fn staged_blob(top: &Path, path: &str) -> String {
        let out = git(top, &["ls-files", "-s", "--", path]);
        out.split_whitespace().nth(1).unwrap().to_string()
    }

    /// A cloned repo's `.gitattributes` may be a link to an endless file
    /// or a FIFO: either is refused by name, never read forever or waited
    /// on, and nothing is written through it.
    #[test]
    fn a_gitattributes_that_is_a_link_or_a_fifo_is_refused_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        git(top, &["init", "-q"]);
        let pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize 9\n";
        std::fs::write(top.join("p.bin"), pointer.replace("{}", &"a".repeat(64))).unwrap();
        let attributes = top.join(".gitattributes");
        std::os::unix::fs::symlink("/dev/zero", &attributes).unwrap();
        let err = track_and_stage(top, &["p.bin"]).unwrap_err().to_string();
        assert!(
            err.contains(".gitattributes") && err.contains("symbolic link"),
            "{err}"
        );
        std::fs::remove_file(&attributes).unwrap();
        let made = Command::new("mkfifo").arg(&attributes).status().unwrap();
        assert!(made.success());
        let err = track_and_stage(top, &["p.bin"]).unwrap_err().to_string();
        assert!(
            err.contains(".gitattributes") && err.contains("not a regular file"),
            "{err}"
        );
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::symlink_metadata(&attributes)
            .unwrap()
            .file_type()
            .is_fifo());
    }

    /// `.gitattributes` is staged as `git add` would stage it: here its
    /// CRLF lines normalised by its own `text` attribute, and again once
    /// a line gives it a filter-free attribute only.
    #[test]
    fn a_gitattributes_file_is_staged_with_the_blob_git_add_gives_it() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        git(top, &["init", "-q"]);
        let attributes = top.join(".gitattributes");
        std::fs::write(&attributes, "* text=auto\r\n*.md diff\r\n").unwrap();
        let paths: Vec<String> = (0..PACK_FROM + 4).map(|i| format!("p{i:04}.bin")).collect();
        for (i, p) in paths.iter().enumerate() {
            let pointer = format!(
                "version https://git-lfs.github.com/spec/v1\noid sha256:{i:064x}\nsize 9\n"
            );
            std::fs::write(top.join(p), pointer).unwrap();
        }
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        track_and_stage(top, &refs[..PACK_FROM + 2]).unwrap();
        let staged = staged_blob(top, ".gitattributes");
        assert_eq!(staged, blob_of(top, ".gitattributes"));
        let raw = git(top, &["hash-object", "--no-filters", ".gitattributes"]);
        assert_ne!(staged, raw.trim(), "the CRs were taken out");
        // No CR left: staged as is, the same blob either way.
        std::fs::write(&attributes, "* text=auto\n").unwrap();
        track_and_stage(top, &refs[PACK_FROM + 2..]).unwrap();
        assert_eq!(
            staged_blob(top, ".gitattributes"),
            blob_of(top, ".gitattributes")
        );
        for p in &refs {
            assert_eq!(staged_blob(top, p), blob_of(top, p), "{p}");
        }
    }

    #[test]
    fn many_tracked_pointers_are_staged_with_the_blobs_git_add_gives_them() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        git(top, &["init", "-q"]);
        std::fs::create_dir(top.join("d")).unwrap();
        // An encoding git applies on add: that path must be converted.
        std::fs::write(
            top.join(".gitattributes"),
            "/d/enc.bin working-tree-encoding=UTF-16LE\n",
        )
        .unwrap();
        let mut paths: Vec<String> = (0..PACK_FROM + 4)
            .map(|i| format!("d/f{i:04}.bin"))
            .collect();
        paths.push("d/enc.bin".into());
        for (i, p) in paths.iter().enumerate() {
            let pointer = format!(
                "version https://git-lfs.github.com/spec/v1\noid sha256:{i:064x}\nsize 9\n"
            );
            let bytes = match p.as_str() {
                "d/enc.bin" => pointer.encode_utf16().flat_map(u16::to_le_bytes).collect(),
                _ => pointer.into_bytes(),
            };
            std::fs::write(top.join(p), bytes).unwrap();
        }
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        track_and_stage(top, &refs).unwrap();
        for p in &refs {
            assert_eq!(staged_blob(top, p), blob_of(top, p), "{p}");
        }
        // And again through promotion's path, after the lines are written.
        let attrs = attributes(top, &refs).unwrap();
        let enc = attrs.last().unwrap();
        assert!(!enc.pointer_as_is, "{enc:?}");
        assert!(attrs[..refs.len() - 1].iter().all(|a| a.pointer_as_is));
    }

    #[test]
    fn own_lines_are_told_from_lines_that_only_look_like_them() {
        for path in ["a.bin", "d/x y.bin", "#!\\*?[]é.bin", "dir/[[:space:]]"] {
            let line = format!("{} {LFS_ATTRIBUTES}\n", literal(path));
            assert_eq!(own_line(&line).as_deref(), Some(path), "{line}");
        }
        for line in [
            "/a* filter=lfs diff=lfs merge=lfs -text\n",   // a glob
            "a.bin filter=lfs diff=lfs merge=lfs -text\n", // any folder's a.bin
            "/a.bin filter=lfs diff=lfs merge=lfs -text\r\n",
            "/a.bin filter=lfs diff=lfs merge=lfs -text", // no newline
            "/a.bin filter=lfs diff=lfs merge=lfs -text ident\n",
            "/a\tb filter=lfs diff=lfs merge=lfs -text\n",
            "/a\\ filter=lfs diff=lfs merge=lfs -text\n",
        ] {
            assert_eq!(own_line(line), None, "{line:?}");
        }
    }

    #[test]
    fn attributes_are_asked_without_the_lines_of_other_paths_unless_a_folder_has_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        git(top, &["init", "-q"]);
        let others: Vec<String> = (0..50).map(|i| format!("d/o{i}.bin")).collect();
        let mut text = String::from("*.txt -text\n");
        for p in others.iter().map(String::as_str).chain(["d/asked.bin"]) {
            text.push_str(&format!("{} {LFS_ATTRIBUTES}\n", literal(p)));
        }
        text.push_str("/d/o1* ident\n");
        std::fs::write(top.join(".gitattributes"), text).unwrap();
        let asked = [
            "d/asked.bin",
            "d/new.bin",
            "d/o10.bin.txt",
            ".gitattributes",
        ];
        let view = Unrelated::drop_from(top, &asked).unwrap().expect("a view");
        let kept = std::fs::read_to_string(view.dir.path().join(".gitattributes")).unwrap();
        assert_eq!(kept.lines().count(), 3, "{kept}");
        let seen = attributes(top, &asked).unwrap();
        assert_eq!(seen, attributes_in_work_tree(top, &asked).unwrap());
        assert_eq!(
            seen.iter().map(|a| a.lfs).collect::<Vec<_>>(),
            [true, false, false, false]
        );
        assert!(!seen[2].pointer_as_is, "o10.bin.txt has ident");

        std::fs::create_dir(top.join("d")).unwrap();
        std::fs::write(top.join("d/.gitattributes"), "asked.bin -filter\n").unwrap();
        assert!(Unrelated::drop_from(top, &asked).unwrap().is_none());
        assert!(!attributes(top, &asked).unwrap()[0].lfs);
    }

    #[test]
    fn staging_as_is_reads_no_attributes_where_git_can_be_told_so() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        git(top, &["init", "-q"]);
        // An attribute that would change the blob: git 2.40 and later must
        // not read it when told the file is stored as it is.
        std::fs::write(
            top.join(".gitattributes"),
            "/p.bin working-tree-encoding=UTF-16LE\n",
        )
        .unwrap();
        let text: Vec<u8> = "pointer\n"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        std::fs::write(top.join("p.bin"), &text).unwrap();
        stage(top, &["p.bin"], Convert::AsIs).unwrap();
        let raw = git(top, &["hash-object", "--no-filters", "p.bin"]);
        let converted = blob_of(top, "p.bin");
        assert_ne!(raw.trim(), converted, "the attribute converts");
        let want = match git_version() >= (2, 40) {
            true => raw.trim().to_string(),
            false => converted, // GIT_ATTR_SOURCE is not known: as before
        };
        assert_eq!(staged_blob(top, "p.bin"), want);
        stage(top, &["p.bin"], Convert::ByAttributes).unwrap();
        assert_eq!(staged_blob(top, "p.bin"), blob_of(top, "p.bin"));
    }

    #[test]
    fn odd_names_are_tracked_exactly_and_covered_ones_are_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        git(top, &["init", "-q"]);
        std::fs::write(
            top.join(".gitattributes"),
            "*.cram filter=lfs diff=lfs merge=lfs -text",
        )
        .unwrap();
        let paths = ["a b.bam", "d/x[1]*.bam", "#h.bam", "r.cram"];
        assert_eq!(
            tracked(top, &paths).unwrap(),
            vec![false, false, false, true]
        );
        for p in &paths[..3] {
            std::fs::create_dir_all(top.join(p).parent().unwrap()).unwrap();
            std::fs::write(top.join(p), "pointer\n").unwrap();
        }
        std::fs::write(top.join("r.cram"), "pointer\n").unwrap();
        assert_eq!(track_and_stage(top, &paths).unwrap(), 3);
        assert_eq!(tracked(top, &paths).unwrap(), vec![true; 4]);
        let staged = git(top, &["diff", "--cached", "--name-only"]);
        assert_eq!(staged.lines().count(), 5, "{staged}");
        // A sibling that only matches as a glob is not swept in.
        assert_eq!(tracked(top, &["d/x1y.bam"]).unwrap(), vec![false]);
        assert_eq!(
            track_and_stage(top, &paths).unwrap(),
            0,
            "nothing left to add"
        );
        let text = std::fs::read_to_string(top.join(".gitattributes")).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(
            text.starts_with("*.cram filter=lfs diff=lfs merge=lfs -text\n"),
            "{text}"
        );
    }

    #[test]
    fn every_accepted_path_is_one_exact_anchored_pattern_and_others_are_refused() {
        assert_eq!(pattern("#h.bam").unwrap(), "/#h.bam");
        assert_eq!(pattern("!n.bam").unwrap(), "/!n.bam");
        assert_eq!(pattern("\"q\".bam").unwrap(), "/\"q\".bam");
        assert_eq!(pattern("d/a b*.bam").unwrap(), "/d/a[[:space:]]b\\*.bam");
        let long = " ".repeat(200);
        for bad in [
            "a\nb.bam",
            "a\rb",
            "a\0b",
            "a\tb",
            "a\x0bb",
            "",
            long.as_str(),
        ] {
            let err = pattern(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        // Git agrees: the pattern of a top-level name does not match deeper.
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        git(top, &["init", "-q"]);
        std::fs::write(top.join("x.bam"), "pointer\n").unwrap();
        std::fs::write(top.join("\"q\" #1.bam"), "pointer\n").unwrap();
        track_and_stage(top, &["x.bam", "\"q\" #1.bam"]).unwrap();
        let got = tracked(top, &["x.bam", "sub/x.bam", "\"q\" #1.bam", "q"]).unwrap();
        assert_eq!(got, vec![true, false, true, false]);
    }
}
