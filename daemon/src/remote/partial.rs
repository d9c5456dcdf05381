//! A resumable download's partial file and its record.
//!
//! `partial/<id>.part` holds the first bytes of one version of one object;
//! `partial/<id>.part.json` records which version (the object, its ETag, its
//! size and, where pinned, its Last-Modified) and how many of those bytes
//! are known to have come from answers that were checked (`answer.rs`) and
//! are on disk. A resume trusts that many bytes and no more: a partial file
//! without a record (left by an older drsd, or planted), with a record of
//! another version, or longer than its record is cut back before anything
//! is appended. The record is replaced whole (temp file, fsync, rename) at
//! each checkpoint, so a kill -9 leaves the last one.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The version a partial file belongs to, and how much of it is checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Record {
    pub object: String,
    pub etag: Option<String>,
    pub size: u64,
    pub last_modified: Option<String>,
    /// Bytes from the start of the file that came from checked answers and
    /// were synced to disk.
    pub checked: u64,
}

impl Record {
    fn same_version(&self, other: &Record) -> bool {
        (&self.object, &self.etag, self.size, &self.last_modified)
            == (&other.object, &other.etag, other.size, &other.last_modified)
    }
}

/// A partial file, open for appending, and where its record goes.
pub(super) struct Partial {
    pub path: PathBuf,
    record: Record,
}

impl Partial {
    /// Opens the partial file at `path` for `version` and returns it with
    /// where to resume: the checked bytes of an earlier try at the same
    /// version (rounded down to `align`), when `resumable`; else 0. The
    /// file is cut to that length and the record written before returning.
    pub fn open(
        path: PathBuf,
        version: Record,
        resumable: bool,
        align: u64,
    ) -> std::io::Result<(Partial, File, u64)> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            // Not world-readable: a partial is the start of someone's data.
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        let have = file.metadata()?.len();
        let earlier = read_record(&record_path(&path));
        let trusted = match earlier {
            Some(r) if resumable && r.same_version(&version) => r.checked.min(have),
            _ => 0,
        };
        let start = (trusted - trusted % align.max(1)).min(version.size);
        file.set_len(start)?;
        let mut partial = Partial {
            path,
            record: version,
        };
        partial.checkpoint(start)?;
        Ok((partial, file, start))
    }

    /// Records that the first `checked` bytes are good and on disk (the
    /// caller synced them).
    pub fn checkpoint(&mut self, checked: u64) -> std::io::Result<()> {
        self.record.checked = checked;
        let to = record_path(&self.path);
        let dir = to.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::Builder::new()
            .prefix(".record-")
            .tempfile_in(dir)?;
        serde_json::to_writer(&mut tmp, &self.record)?;
        tmp.flush()?;
        tmp.as_file().sync_data()?;
        tmp.persist(&to).map_err(|e| e.error)?;
        Ok(())
    }

    /// A handle the writer thread records checkpoints through.
    pub fn for_writer(&self) -> Partial {
        Partial {
            path: self.path.clone(),
            record: self.record.clone(),
        }
    }

    /// Removes the partial file and its record: nothing of it is trusted.
    pub fn discard(&self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(record_path(&self.path));
    }

    /// Removes the record once the partial file was adopted into the pool.
    pub fn adopted(&self) {
        let _ = std::fs::remove_file(record_path(&self.path));
    }
}

fn record_path(partial: &Path) -> PathBuf {
    let mut name = partial.as_os_str().to_owned();
    name.push(".json");
    PathBuf::from(name)
}

/// The record, when there is one that reads; anything else is no record.
fn read_record(path: &Path) -> Option<Record> {
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(etag: &str) -> Record {
        Record {
            object: "http://h/x".into(),
            etag: Some(etag.into()),
            size: 10_000,
            last_modified: None,
            checked: 0,
        }
    }

    #[test]
    fn a_partial_file_resumes_only_its_checked_bytes_of_the_same_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.part");
        // No record (an older drsd's file, or a planted one): not trusted.
        std::fs::write(&path, vec![7u8; 5000]).unwrap();
        let (mut p, _, start) = Partial::open(path.clone(), version("v1"), true, 1000).unwrap();
        assert_eq!((start, std::fs::metadata(&path).unwrap().len()), (0, 0));
        // 3500 checked of 5000 on disk: resumes at 3000.
        std::fs::write(&path, vec![7u8; 5000]).unwrap();
        p.checkpoint(3500).unwrap();
        let (_, _, start) = Partial::open(path.clone(), version("v1"), true, 1000).unwrap();
        assert_eq!(
            (start, std::fs::metadata(&path).unwrap().len()),
            (3000, 3000)
        );
        // Another version, or not resumable: from 0.
        let (_, _, start) = Partial::open(path.clone(), version("v2"), true, 1000).unwrap();
        assert_eq!(start, 0);
        std::fs::write(&path, vec![7u8; 5000]).unwrap();
        let (mut p, _, _) = Partial::open(path.clone(), version("v2"), true, 1000).unwrap();
        p.checkpoint(5000).unwrap();
        let (p, _, start) = Partial::open(path.clone(), version("v2"), false, 1000).unwrap();
        assert_eq!(start, 0);
        p.discard();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
