//! The per-repo copy of the registry: `<git common dir>/lfs/foreign/registry.jsonl`,
//! one JSON [`Entry`] per line, sorted by path; never committed (it is
//! inside `.git`). Rewritten whole on each change through a temp file,
//! fsync and rename, so a reader (or a restore after kill -9) sees either
//! the old file or the new one, never a torn line.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{Entry, RegistryError};
use crate::safe_write::{self, Mode};
use crate::IoError;

/// The mirror's place for a repo whose common git folder is `common_dir`.
pub fn path_in(common_dir: &Path) -> PathBuf {
    common_dir.join(MIRROR)
}

/// The mirror's place under the common git folder.
const MIRROR: &str = "lfs/foreign/registry.jsonl";

/// Replaces the mirror of the repo whose common git folder is `common_dir`
/// with `entries`: through [`safe_write`] (created 0600, since signed URLs
/// in it stay private; synced with its folder; never through a symlink
/// planted in `.git`).
pub fn write(common_dir: &Path, entries: &[Entry]) -> Result<(), RegistryError> {
    let mut text = Vec::with_capacity(entries.len() * 400);
    for entry in entries {
        serde_json::to_writer(&mut text, entry).expect("entries serialize");
        text.push(b'\n');
    }
    safe_write::write(common_dir, Path::new(MIRROR), &text, Mode::PRIVATE).map_err(|e| {
        let why = std::io::Error::other(e.to_string());
        IoError::new("write", path_in(common_dir), why)
    })?;
    // Its folder private too (the write above found it a real folder, not a
    // link). A folder that is not ours (a shared repo) keeps its mode: the
    // file is 0600 anyway.
    if let Some(dir) = path_in(common_dir).parent() {
        let _ = crate::private::tighten(dir);
    }
    Ok(())
}

/// The entries of the mirror at `path`; none when there is no file.
pub fn read(path: &Path) -> Result<Vec<Entry>, RegistryError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(IoError::new("read", path, source).into()),
    };
    let lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    lines
        .map(|(i, line)| {
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
            Ok(entry)
        })
        .collect()
}

/// Whether the mirror at `path` is private to its owner.
pub fn is_private(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 == 0)
}
