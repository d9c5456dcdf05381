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

use std::fs::File;
use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use crate::pool::NodeFile;

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

/// A partial file, open for appending, and where its record goes. Both are
/// reached through the folder's descriptor checked when the download began
/// ([`NodeFile`]): a folder swapped for a link meanwhile is never written
/// into, nor anything removed from it.
pub(super) struct Partial {
    pub file: NodeFile,
    record: Record,
}

impl Partial {
    /// Opens the partial file `file` for `version` and returns it with
    /// where to resume: the checked bytes of an earlier try at the same
    /// version (rounded down to `align`), when `resumable`; else 0. The
    /// file is cut to that length and the record written before returning.
    pub fn open(
        file: NodeFile,
        version: Record,
        resumable: bool,
        align: u64,
    ) -> std::io::Result<(Partial, File, u64)> {
        // Not world-readable: a partial is the start of someone's data.
        let open = file.open_rw(0o600)?;
        let have = open.metadata()?.len();
        let earlier = read_record(&record_of(&file));
        let trusted = match earlier {
            Some(r) if resumable && r.same_version(&version) => r.checked.min(have),
            _ => 0,
        };
        let start = (trusted - trusted % align.max(1)).min(version.size);
        open.set_len(start)?;
        let mut partial = Partial {
            file,
            record: version,
        };
        partial.checkpoint(start)?;
        Ok((partial, open, start))
    }

    /// Records that the first `checked` bytes are good and on disk (the
    /// caller synced them).
    pub fn checkpoint(&mut self, checked: u64) -> std::io::Result<()> {
        self.record.checked = checked;
        let to = record_of(&self.file);
        let tmp = to.sibling(crate::pool::node_dir::unique_name(".record-"));
        let written = (|| {
            let mut out = tmp.create_new(0o600)?;
            serde_json::to_writer(&mut out, &self.record)?;
            out.flush()?;
            out.sync_data()?;
            tmp.rename_to(&to)
        })();
        if written.is_err() {
            let _ = tmp.remove();
        }
        written
    }

    /// A handle the writer thread records checkpoints through.
    pub fn for_writer(&self) -> Partial {
        Partial {
            file: self.file.clone(),
            record: self.record.clone(),
        }
    }

    /// Removes the partial file and its record: nothing of it is trusted.
    pub fn discard(&self) {
        let _ = self.file.remove();
        let _ = record_of(&self.file).remove();
    }

    /// Removes the record once the partial file was adopted into the pool.
    pub fn adopted(&self) {
        let _ = record_of(&self.file).remove();
    }
}

/// The record beside `partial`: its name and `.json`.
fn record_of(partial: &NodeFile) -> NodeFile {
    partial.sibling(format!("{}.json", partial.name))
}

/// The record, when there is one that reads; anything else is no record.
fn read_record(record: &NodeFile) -> Option<Record> {
    let mut text = Vec::new();
    record.open_read().ok()?.read_to_end(&mut text).ok()?;
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
        let open = std::sync::Arc::new(crate::pool::node_dir::check(dir.path()).unwrap());
        let file = NodeFile::new(open, dir.path(), "a.part".into());
        // No record (an older drsd's file, or a planted one): not trusted.
        std::fs::write(&path, vec![7u8; 5000]).unwrap();
        let (mut p, _, start) = Partial::open(file.clone(), version("v1"), true, 1000).unwrap();
        assert_eq!((start, std::fs::metadata(&path).unwrap().len()), (0, 0));
        // 3500 checked of 5000 on disk: resumes at 3000.
        std::fs::write(&path, vec![7u8; 5000]).unwrap();
        p.checkpoint(3500).unwrap();
        let (_, _, start) = Partial::open(file.clone(), version("v1"), true, 1000).unwrap();
        assert_eq!(
            (start, std::fs::metadata(&path).unwrap().len()),
            (3000, 3000)
        );
        // Another version, or not resumable: from 0.
        let (_, _, start) = Partial::open(file.clone(), version("v2"), true, 1000).unwrap();
        assert_eq!(start, 0);
        std::fs::write(&path, vec![7u8; 5000]).unwrap();
        let (mut p, _, _) = Partial::open(file.clone(), version("v2"), true, 1000).unwrap();
        p.checkpoint(5000).unwrap();
        let (p, _, start) = Partial::open(file.clone(), version("v2"), false, 1000).unwrap();
        assert_eq!(start, 0);
        p.discard();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
