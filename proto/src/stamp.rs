//! A work-tree file the daemon wrote from bytes it had checked against
//! their oid, and the file's stat data just after: while a file's stat data
//! is still what was stamped, its content is still the object.
//!
//! git trusts its index the same way (an entry whose stat data matches the
//! file is not read again). `drsctl clone` hands the stamps of the large
//! files the daemon checked out to `drs-hook filter-process`, so the index
//! refresh that follows need not hash again what the daemon just wrote and
//! verified. Every write to a file moves its ctime, which no unprivileged
//! process can set back; the inode and device pin the file itself, not the
//! name, so a file swapped in under the name does not match.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Oid, Pointer};

/// The variable naming the file of stamps `drs-hook filter-process` trusts:
/// a private temp file `drsctl` writes for the one git command it runs.
pub const STAMPS_ENV: &str = "DRS_HOOK_STAMPS";

/// Writes `stamps` as JSON lines.
pub fn write_stamps(stamps: &[FileStamp], mut to: impl Write) -> std::io::Result<()> {
    for stamp in stamps {
        serde_json::to_writer(&mut to, stamp)?;
        to.write_all(b"\n")?;
    }
    to.flush()
}

/// The stamps [`write_stamps`] wrote to `path`, by path.
pub fn read_stamps(path: &Path) -> std::io::Result<HashMap<String, FileStamp>> {
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut stamps = HashMap::new();
    for line in file.lines() {
        let stamp: FileStamp = serde_json::from_str(&line?)?;
        stamps.insert(stamp.path.clone(), stamp);
    }
    Ok(stamps)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    /// As git names it: relative to the work tree's top, `/`-separated.
    pub path: String,
    pub oid: Oid,
    pub size: u64,
    pub dev: u64,
    pub ino: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

impl FileStamp {
    /// The stamp of the file at `path` whose stat data is `meta` and whose
    /// content the caller checked to be `pointer`'s object.
    pub fn new(path: String, pointer: &Pointer, meta: &std::fs::Metadata) -> FileStamp {
        FileStamp {
            path,
            oid: pointer.oid,
            size: pointer.size,
            dev: meta.dev(),
            ino: meta.ino(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether `meta` (of a file not followed through a symlink) is the
    /// stamped file, unchanged since.
    pub fn matches(&self, meta: &std::fs::Metadata) -> bool {
        meta.file_type().is_file()
            && meta.len() == self.size
            && (meta.dev(), meta.ino()) == (self.dev, self.ino)
            && (meta.mtime(), meta.mtime_nsec()) == self.mtime
            && (meta.ctime(), meta.ctime_nsec()) == self.ctime
    }

    /// The pointer of the stamped content.
    pub fn pointer(&self) -> Pointer {
        Pointer {
            oid: self.oid,
            size: self.size,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_matches_its_file_until_the_file_is_written_or_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"content").unwrap();
        let pointer = Pointer {
            oid: Oid::of(b"content"),
            size: 7,
        };
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let stamp = FileStamp::new("f".into(), &pointer, &meta);
        assert!(stamp.matches(&std::fs::symlink_metadata(&path).unwrap()));

        // Same length, same mtime set back: the ctime still moved.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, b"CONTENT").unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(meta.modified().unwrap()).unwrap();
        let now = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(now.mtime_nsec(), meta.mtime_nsec(), "mtime set back");
        assert!(!stamp.matches(&now), "a rewritten file does not match");

        // Another file put under the name, even with the stamp's times.
        let other = dir.path().join("g");
        std::fs::write(&other, b"content").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(!stamp.matches(&std::fs::symlink_metadata(&path).unwrap()));
    }
}
