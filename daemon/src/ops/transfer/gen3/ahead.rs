//! The md5 of objects on their way to a Gen3 commons (and of their parts,
//! the ETags the store must answer), hashed ahead of the push. A record registered under the content's did before its bytes go
//! up must name the md5 (`own_did.rs`), which for an object of many parts
//! is a pass over every byte before the upload may begin: on one core, 4 s
//! a GiB. So when a commit lands in a repo whose object remote is a commons
//! (the post-commit hook tells the daemon), the objects of HEAD larger than
//! one part that the commons has no record of with a location (those a
//! push will send: not a cohort cloned from it) are hashed then, in the
//! background, one at a time; the push finds the md5 known, or waits for
//! the pass under way rather than making a second.
//!
//! The md5 is kept by oid, in memory, only when the same pass showed the
//! bytes hash to the oid: the md5 of content is a fact of the content, and
//! so never stale. Nothing is written anywhere another user could change.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use super::{repo_file, FenceSendError};
use crate::blocking;
use crate::lfs::hydrate::object_path;
use crate::lfs::Pointer;
use crate::pool::{Blob, Oid};
use crate::remote::digest::{checked_hashes, Hashes};
use crate::remote::ObjectRemote;
use crate::stores::drs::IndexdClient;

/// At most this many md5s are kept (a cohort of large objects; the oldest
/// are not tracked, so past it the map is cleared and begins again).
const KEPT: usize = 100_000;

/// md5s of content, by oid: known, or being hashed.
#[derive(Default)]
pub struct Md5Ahead {
    by_oid: Mutex<HashMap<Oid, Arc<OnceCell<Hashes>>>>,
    /// Objects found in the commons with a location: not asked again at
    /// each hook (a cohort cloned from it would be asked for whole).
    in_commons: Mutex<std::collections::HashSet<Oid>>,
}

impl Md5Ahead {
    /// The md5 of `blob`, object `oid`, and of its parts of `part_size`:
    /// known, the pass under way waited for, or hashed now (and its sha256
    /// checked).
    pub(super) async fn hashes(
        &self,
        oid: Oid,
        blob: Arc<Blob>,
        part_size: u64,
    ) -> Result<Hashes, FenceSendError> {
        let cell = self.cell(oid);
        let hashes = cell
            .get_or_try_init(|| checked_hashes(blob, oid, part_size))
            .await
            .cloned();
        if hashes.is_err() {
            // Not kept: the next ask hashes again.
            self.forget_unset(oid);
        }
        Ok(hashes?)
    }

    /// The hashes of `oid`, if known.
    pub(super) fn known(&self, oid: Oid) -> Option<Hashes> {
        let by_oid = self.by_oid.lock().unwrap_or_else(|e| e.into_inner());
        by_oid.get(&oid).and_then(|cell| cell.get().cloned())
    }

    fn found(&self, oid: Oid) -> bool {
        let found = self.in_commons.lock().unwrap_or_else(|e| e.into_inner());
        found.contains(&oid)
    }

    fn cell(&self, oid: Oid) -> Arc<OnceCell<Hashes>> {
        let mut by_oid = self.by_oid.lock().unwrap_or_else(|e| e.into_inner());
        if by_oid.len() >= KEPT && !by_oid.contains_key(&oid) {
            by_oid.retain(|_, cell| !cell.initialized());
        }
        by_oid.entry(oid).or_default().clone()
    }

    fn forget_unset(&self, oid: Oid) {
        let mut by_oid = self.by_oid.lock().unwrap_or_else(|e| e.into_inner());
        if by_oid.get(&oid).is_some_and(|cell| !cell.initialized()) {
            by_oid.remove(&oid);
        }
    }

    /// Hashes, one after the other, the objects of `repo`'s HEAD larger
    /// than `part_size` whose files are in `lfs_objects`.
    async fn hash_head(
        self: Arc<Self>,
        repo: PathBuf,
        lfs_objects: PathBuf,
        part_size: u64,
        indexd: IndexdClient,
    ) {
        let top = repo.clone();
        let pointers = match blocking(move || crate::lfs::scan::head_pointers(&top)).await {
            Ok(pointers) => pointers,
            Err(e) => {
                log::debug!("hashing ahead of a push in {}: {e}", repo.display());
                return;
            }
        };
        for pointer in pointers.into_iter().filter(|p| p.size > part_size) {
            if self.known(pointer.oid).is_some() || self.found(pointer.oid) {
                continue;
            }
            if in_commons(&indexd, pointer).await {
                let mut found = self.in_commons.lock().unwrap_or_else(|e| e.into_inner());
                if found.len() >= KEPT {
                    found.clear();
                }
                found.insert(pointer.oid);
                continue;
            }
            let path = object_path(&lfs_objects, &pointer.oid);
            let Ok(Some(blob)) = blocking(move || repo_file(&path)).await else {
                continue;
            };
            if blob.len() != pointer.size {
                continue;
            }
            match self.hashes(pointer.oid, Arc::new(blob), part_size).await {
                Ok(_) => log::info!("object {}: md5 hashed ahead of its push", pointer.oid),
                Err(e) => log::debug!("object {}: not hashed ahead: {e}", pointer.oid),
            }
        }
    }
}

/// Whether the commons has a record of `pointer`'s content with a location:
/// its push would send nothing, or read the record back, needing no md5.
/// Not known (the commons out of reach): no.
async fn in_commons(indexd: &IndexdClient, pointer: Pointer) -> bool {
    match indexd.by_sha256(pointer.oid).await {
        Ok(records) => records
            .iter()
            .any(|r| r.size == Some(pointer.size) && !r.urls.is_empty()),
        Err(_) => false,
    }
}

impl super::Transfers {
    /// After git told the daemon of `repo` (a hook ran: a commit, a
    /// checkout, a merge): when its object remote is a Gen3 commons, the
    /// md5s its next push will need are hashed in the background.
    pub async fn hash_ahead(&self, repo: &Path) {
        let Ok(facts) = self.facts(repo).await else {
            return;
        };
        let Ok(ObjectRemote::Gen3(commons)) = facts.object_remote(repo) else {
            return;
        };
        let Ok(indexd) = self.remote.indexd(&commons.indexd()) else {
            return;
        };
        let lfs_objects = facts.lfs.join("objects");
        let task = self.md5s.clone().hash_head(
            repo.to_path_buf(),
            lfs_objects,
            self.upload.part_size,
            indexd,
        );
        tokio::spawn(task);
    }
}
