//! The [`Backend`] trait every engine of either tier implements, and the
//! shapes it hands out ([`Blob`], [`Staged`], [`TierStats`]). Kept small so
//! a new engine (another kv store, an object store for a team) only stores
//! and lists bytes under opaque keys; routing, hashing and pins stay in
//! [`crate::pool::Pool`].

use std::fs::File;
use std::io::{Cursor, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::error::{IoContext, Result};
use super::node_dir::NodeFile;

/// What every engine of either tier implements. Keys and values are opaque
/// bytes: an engine never interprets a key (the pool uses sha256 digests).
pub trait Backend: Send + Sync + 'static {
    /// The engine's name, as `status` shows it.
    fn name(&self) -> &'static str;
    fn has(&self, key: &[u8]) -> Result<bool>;
    /// The value's length, without reading it.
    fn size(&self, key: &[u8]) -> Result<Option<u64>>;
    fn get(&self, key: &[u8]) -> Result<Option<Blob>>;
    /// Up to `len` bytes of `key`'s value at `offset` (cut at the end; an
    /// `offset` past the end reads nothing) and the value's whole length;
    /// `None` when absent. Engines that read a range without fetching the
    /// whole value (a database's large objects) say so here.
    fn read_range(&self, key: &[u8], offset: u64, len: u64) -> Result<Option<(Vec<u8>, u64)>> {
        let Some(blob) = self.get(key)? else {
            return Ok(None);
        };
        let size = blob.len();
        Ok(Some((blob.read_at(offset.min(size), len)?, size)))
    }
    /// True when each `get` makes a fresh copy of the value (a database's
    /// large objects spooled to a file): no file of it stays the same from
    /// one read to the next, so there is nothing to remember as verified.
    fn gets_are_copies(&self) -> bool {
        false
    }
    /// Stores `value` under `key`; a key already present is left as it is.
    /// True when this call stored it.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<bool>;
    /// Stores each `(key, value)` as [`Backend::put`] would, in one write
    /// transaction where the engine has them (a batch of small objects pays
    /// one commit, not one each). True for each pair this call stored.
    fn put_many(&self, entries: &[(&[u8], &[u8])]) -> Result<Vec<bool>> {
        entries.iter().map(|(k, v)| self.put(k, v)).collect()
    }
    /// Write transactions committed since the engine was opened, for
    /// engines that have them (0 for the others): what a batch saves.
    fn write_transactions(&self) -> u64 {
        0
    }
    /// Removes `key`; true when it was there.
    fn delete(&self, key: &[u8]) -> Result<bool>;
    /// Whether `key`'s entry is a file another user stored, in a folder
    /// several users share; false for engines with no owners.
    fn stored_by_another(&self, _key: &[u8]) -> Result<bool> {
        Ok(false)
    }
    /// Removes each of `keys` (a sweep's batch), in one write transaction
    /// where the engine has them; for each, its size when this call removed
    /// it. A key gone already is `None`.
    fn delete_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<u64>>> {
        keys.iter()
            .map(|k| {
                let deleted = match self.size(k)? {
                    Some(bytes) => self.delete(k)?.then_some(bytes),
                    None => None,
                };
                crate::failpoint::hit("gc-after-one-delete");
                Ok(deleted)
            })
            .collect()
    }
    /// Moves `key`'s entry aside, out of every lookup (`has`, `get`,
    /// `list`, `stats`), keeping its bytes for a person to look at: they no
    /// longer match the key. Returns where they went; `None` when the key
    /// was not there.
    fn quarantine(&self, key: &[u8]) -> Result<Option<String>>;
    /// Calls `each` with every entry, read afresh from storage: what
    /// `verify` must judge is what is stored now, not what a cache of the
    /// engine's remembers.
    fn scan(&self, each: &mut dyn FnMut(Vec<u8>, Blob) -> Result<()>) -> Result<()> {
        for key in self.list()? {
            if let Some(blob) = self.get(&key)? {
                each(key, blob)?;
            }
        }
        Ok(())
    }
    /// Every key, each once. GC deletes whatever this omits from the live
    /// set, so it must be complete and hold keys, never values.
    fn list(&self) -> Result<Vec<Vec<u8>>>;
    /// Starts a write whose bytes the engine holds aside until `commit`;
    /// dropping it uncommitted leaves nothing behind.
    fn stage(&self) -> Result<Box<dyn Staged + '_>>;
    /// Takes the finished file at `path` (on the engine's filesystem, its
    /// bytes already verified against `key`) as the value of `key`; the file
    /// is gone afterwards either way. True when this call stored it.
    fn adopt(&self, key: &[u8], path: &Path) -> Result<bool> {
        let value = std::fs::read(path).at("read", path)?;
        let stored = self.put(key, &value)?;
        std::fs::remove_file(path).at("remove", path)?;
        Ok(stored)
    }
    /// [`adopt`](Self::adopt) of a file in this node's folder, `opened`
    /// from it, reached through the folder's checked descriptor only.
    fn adopt_at(&self, key: &[u8], file: &NodeFile, mut opened: File) -> Result<bool> {
        let mut value = Vec::new();
        opened.read_to_end(&mut value).at("read", &file.shown)?;
        let stored = self.put(key, &value)?;
        file.remove().at("remove", &file.shown)?;
        Ok(stored)
    }
    /// Gives the space of deleted entries back to the file system where the
    /// engine keeps it for reuse (a database's free pages); returns the
    /// bytes given back. Engines that free space at delete do nothing.
    fn compact(&self) -> Result<u64> {
        Ok(0)
    }
    /// Entries and bytes held.
    fn stats(&self) -> Result<TierStats> {
        let keys = self.list()?;
        let mut bytes = 0;
        for key in &keys {
            bytes += self.size(key)?.unwrap_or(0);
        }
        Ok(TierStats {
            entries: keys.len() as u64,
            bytes,
        })
    }
}

/// A write in progress. The pool hashes exactly the bytes it hands to `write`,
/// so the verified digest is the digest of the stored artifact.
pub trait Staged: Send {
    fn write(&mut self, bytes: &[u8]) -> Result<()>;
    /// Makes the staged bytes durable and visible under `key`.
    fn commit(self: Box<Self>, key: &[u8]) -> Result<()>;
    /// The device and inode of the file being written, for an engine that
    /// commits a file under the key's name (so the pool can tell it from
    /// one renamed there by someone else); `None` for the others.
    fn identity(&self) -> Option<(u64, u64)> {
        None
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TierStats {
    pub entries: u64,
    pub bytes: u64,
}

/// A stored value: bytes for the kv tier, an open read-only file for the
/// large tier (never loaded whole).
#[derive(Debug)]
pub enum Blob {
    Bytes(Vec<u8>),
    File { file: File, len: u64, path: PathBuf },
}

impl Blob {
    pub fn len(&self) -> u64 {
        match self {
            Blob::Bytes(b) => b.len() as u64,
            Blob::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The committed file behind a large blob, for hard links into repos.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Blob::Bytes(_) => None,
            Blob::File { path, .. } => Some(path),
        }
    }

    /// Reads up to `len` bytes at `offset` (pread for files). A range running
    /// past the end is cut at the end; `offset > len()` is for the caller to refuse.
    pub fn read_at(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let end = self.len().min(offset.saturating_add(len));
        let start = offset.min(end);
        match self {
            Blob::Bytes(b) => Ok(b[start as usize..end as usize].to_vec()),
            Blob::File { file, path, .. } => {
                let mut buf = vec![0u8; (end - start) as usize];
                file.read_exact_at(&mut buf, start).at("read", path)?;
                Ok(buf)
            }
        }
    }

    /// A reader over the whole value.
    pub fn into_reader(self) -> Box<dyn Read + Send> {
        match self {
            Blob::Bytes(b) => Box::new(Cursor::new(b)),
            Blob::File { file, .. } => Box::new(file),
        }
    }

    pub fn to_vec(self) -> Result<Vec<u8>> {
        match self {
            Blob::Bytes(b) => Ok(b),
            Blob::File {
                mut file,
                len,
                path,
            } => {
                let mut out = Vec::with_capacity(len as usize);
                file.read_to_end(&mut out).at("read", &path)?;
                Ok(out)
            }
        }
    }
}

/// The stage of a kv engine: the value is small, so it waits in memory.
pub(crate) struct MemStage<'a, B: Backend + ?Sized> {
    pub(crate) engine: &'a B,
    pub(crate) buf: Vec<u8>,
}

impl<B: Backend + ?Sized> Staged for MemStage<'_, B> {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    fn commit(self: Box<Self>, key: &[u8]) -> Result<()> {
        self.engine.put(key, &self.buf).map(drop)
    }
}
