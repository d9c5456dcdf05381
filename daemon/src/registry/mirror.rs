//! The per-repo copy of the registry: `<git common dir>/lfs/foreign/registry.jsonl`,
//! one JSON [`Entry`] per line; never committed (it is inside `.git`).
//!
//! Design note. The file is a log: a change appends the lines of the
//! entries it touched, and a later line for a path replaces the earlier
//! ones ([`read`] keeps the last). Rewriting it whole for every add-url or
//! promotion batch cost the whole repo each time (listing 11,000 entries
//! and writing 4 MB took 40 ms for a batch of 1,000), so a repo's batches
//! grew slower as it grew. It is still rewritten whole ([`write`]: temp
//! file, fsync, rename) where that is cheap or needed:
//! - the first time a daemon writes it ([`Mirrors`] knows nothing of it
//!   yet), which also mends a mirror a kill left a change behind;
//! - when the lines appended since outnumber the entries it then held
//!   (so a repo's mirror costs a constant per entry written, amortized);
//! - when the file is not exactly as this daemon left it: another inode,
//!   length, ctime, owner or mode (the ctime catches a same-length edit in
//!   place, even one that set the mtime back). Appending opens an existing name for writing,
//!   which the daemon does nowhere else in a repo; it does so only to the
//!   very file it created last, checked on the open descriptor
//!   (`O_NOFOLLOW`, same device and inode, one link, 0600, same length),
//!   never to whatever a name now leads to.
//!
//! An append is one write and an fsync; a kill in the middle can leave a
//! last line without its newline, which [`read`] drops (the registry had
//! the change first; the next daemon rewrites the file whole).

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Entry, RegistryError};
use crate::safe_write::{self, Mode};
use crate::IoError;

/// The mirror's place for a repo whose common git folder is `common_dir`.
pub fn path_in(common_dir: &Path) -> PathBuf {
    common_dir.join(MIRROR)
}

/// The mirror's place under the common git folder.
const MIRROR: &str = "lfs/foreign/registry.jsonl";

/// Below this many entries a mirror is rewritten whole once as many lines
/// were appended: a small file costs nothing to rewrite.
const REWRITE_FLOOR: usize = 512;

/// Replaces the mirror of the repo whose common git folder is `common_dir`
/// with `entries`: through [`safe_write`] (created 0600, since signed URLs
/// in it stay private; synced with its folder; never through a symlink
/// planted in `.git`).
pub fn write(common_dir: &Path, entries: &[Entry]) -> Result<(), RegistryError> {
    rewrite(common_dir, entries).map(|_| ())
}

/// [`write`], returning what an append then checks.
fn rewrite(common_dir: &Path, entries: &[Entry]) -> Result<Written, RegistryError> {
    let text = lines(entries);
    let meta = safe_write::write_with(common_dir, Path::new(MIRROR), Mode::PRIVATE, |file| {
        file.write_all(&text)
    })
    .map_err(|e| {
        let why = std::io::Error::other(e.to_string());
        IoError::new("write", path_in(common_dir), why)
    })?;
    // Its folder private too (the write above found it a real folder, not a
    // link). A folder that is not ours (a shared repo) keeps its mode: the
    // file is 0600 anyway.
    if let Some(dir) = path_in(common_dir).parent() {
        let _ = crate::private::tighten(dir);
    }
    Ok(Written {
        dev: meta.dev(),
        ino: meta.ino(),
        len: meta.len(),
        ctime: ctime(&meta),
        lines: entries.len(),
        live: entries.len(),
    })
}

fn lines(entries: &[Entry]) -> Vec<u8> {
    let mut text = Vec::with_capacity(entries.len() * 400);
    for entry in entries {
        serde_json::to_writer(&mut text, entry).expect("entries serialize");
        text.push(b'\n');
    }
    text
}

/// A mirror as this daemon last left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Written {
    dev: u64,
    ino: u64,
    len: u64,
    /// Moved by every write, ours included (each append records the new
    /// one), and by nothing else can it be set back.
    ctime: (i64, i64),
    /// Lines in the file.
    lines: usize,
    /// Entries at the last whole rewrite.
    live: usize,
}

impl Written {
    /// Whether `n` more lines are better written by a whole rewrite.
    fn wants_rewrite(&self, n: usize) -> bool {
        self.lines + n > 2 * self.live.max(REWRITE_FLOOR)
    }

    /// Whether the open file `meta` is the one left, untouched since.
    fn is(&self, meta: &std::fs::Metadata) -> bool {
        meta.is_file()
            && (meta.dev(), meta.ino(), meta.len()) == (self.dev, self.ino, self.len)
            && ctime(meta) == self.ctime
            && meta.nlink() == 1
            && meta.uid() == own_uid()
            && meta.permissions().mode() & 0o777 == 0o600
    }
}

fn ctime(meta: &std::fs::Metadata) -> (i64, i64) {
    (meta.ctime(), meta.ctime_nsec())
}

fn own_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// The mirrors this daemon wrote, by file: which can take an append. One
/// lock for all, held across a change's listing and writing, so a whole
/// rewrite never lands after, and undoes, an append of a newer change.
#[derive(Default)]
pub struct Mirrors(Mutex<HashMap<PathBuf, Written>>);

impl Mirrors {
    /// Brings the mirror in `common_dir` up to date after a change to the
    /// entries `changed` (as the registry now holds them): appended when
    /// the file is as this daemon left it and not due for a rewrite, else
    /// rewritten whole from `list()` (the repo's every entry).
    pub fn changed(
        &self,
        common_dir: &Path,
        changed: impl FnOnce() -> Result<Vec<Entry>, RegistryError>,
        list: impl FnOnce() -> Result<Vec<Entry>, RegistryError>,
    ) -> Result<(), RegistryError> {
        let mut kept = crate::lock::lock(&self.0);
        let file = path_in(common_dir);
        let last = kept.remove(&file);
        let changed = changed()?;
        if changed.is_empty() {
            // Nothing to add: the file stays what it was.
            if let Some(last) = last {
                kept.insert(file, last);
            }
            return Ok(());
        }
        let appended = match last {
            Some(last) if !last.wants_rewrite(changed.len()) => {
                append(common_dir, &last, &changed)?
            }
            _ => None,
        };
        let now = match appended {
            Some(now) => now,
            None => rewrite(common_dir, &list()?)?,
        };
        kept.insert(file, now);
        Ok(())
    }

    /// Rewrites the mirror in `common_dir` whole from `list()`.
    pub fn rewrite(
        &self,
        common_dir: &Path,
        list: impl FnOnce() -> Result<Vec<Entry>, RegistryError>,
    ) -> Result<(), RegistryError> {
        let mut kept = crate::lock::lock(&self.0);
        let file = path_in(common_dir);
        kept.remove(&file);
        let now = rewrite(common_dir, &list()?)?;
        kept.insert(file, now);
        Ok(())
    }
}

/// Appends `entries` to the mirror in `common_dir` when it is the file
/// `last` describes (see the module's notes); `None` when it is not, or
/// is gone: the caller rewrites it.
fn append(
    common_dir: &Path,
    last: &Written,
    entries: &[Entry],
) -> Result<Option<Written>, RegistryError> {
    let file = path_in(common_dir);
    let opened = OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&file);
    let mut f: File = match opened {
        Ok(f) => f,
        Err(_) => return Ok(None),
    };
    let meta = f.metadata().map_err(IoError::at("stat", &file))?;
    if !last.is(&meta) {
        log::info!(
            "{} changed since drsd wrote it: rewritten whole",
            file.display()
        );
        return Ok(None);
    }
    let text = lines(entries);
    f.write_all(&text)
        .and_then(|()| f.sync_data())
        .map_err(IoError::at("append to", &file))?;
    let after = f.metadata().map_err(IoError::at("stat", &file))?;
    Ok(Some(Written {
        len: last.len + text.len() as u64,
        ctime: ctime(&after),
        lines: last.lines + entries.len(),
        ..*last
    }))
}

/// The entries of the mirror at `path`, one per path (its last line), by
/// path; none when there is no file. A last line without its newline (an
/// append cut short) is left out.
pub fn read(path: &Path) -> Result<Vec<Entry>, RegistryError> {
    let mut text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(IoError::new("read", path, source).into()),
    };
    let whole = text.rfind('\n').map_or(0, |i| i + 1);
    if !text[whole..].trim().is_empty() {
        log::warn!(
            "{}: its last line was cut short (a write interrupted); left out",
            path.display()
        );
        text.truncate(whole);
    }
    let lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let mut by_path = BTreeMap::new();
    for (i, line) in lines {
        let bad = |why: String| RegistryError::BadMirror {
            path: path.to_path_buf(),
            line: i + 1,
            why,
        };
        let entry: Entry = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        // A repo may be hostile: a size SQLite cannot store is named here.
        if entry.object.size > crate::MAX_OBJECT_SIZE {
            return Err(bad(format!(
                "size {} is past the largest object size drsd handles",
                entry.object.size
            )));
        }
        by_path.insert(entry.path.clone(), entry);
    }
    Ok(by_path.into_values().collect())
}

/// Whether the mirror at `path` is private to its owner.
pub fn is_private(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 == 0)
}
