//! What a transfer needs to know about a repo, found with git once and kept
//! until the repo's `.gitattributes` (where the object remote is recorded)
//! changes: thousands of small objects must not cost three git processes
//! each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::TransferError;
use crate::blocking;
use crate::git::Repo;
use crate::lfs::setup::recorded;
use crate::remote::ObjectRemote;

#[derive(Clone)]
pub struct RepoFacts {
    /// The work tree's canonical top: the key of the repo's write lock.
    pub top: PathBuf,
    /// `<common git dir>/lfs`: git-lfs's objects and tmp folders.
    pub lfs: PathBuf,
    /// `<lfs>/tmp`: on the repo's filesystem, where git-lfs renames what
    /// the agent hands it.
    pub tmp: PathBuf,
    /// The object remote recorded in `.gitattributes`, if any.
    pub remote: Option<String>,
    /// The Gen3 Indexd recorded there, if any: pushes register with it and
    /// downloads resolve through it.
    pub indexd: Option<url::Url>,
    /// Indexd `authz` resources for new records.
    pub authz: Vec<String>,
    attributes: PathBuf,
    stamp: Option<Stamp>,
}

impl RepoFacts {
    /// The repo's object remote (`repo` as the request named it, for the
    /// advice when there is none).
    pub fn object_remote(&self, repo: &Path) -> Result<ObjectRemote, TransferError> {
        let url = self
            .remote
            .as_deref()
            .ok_or_else(|| TransferError::NoObjectRemote {
                repo: repo.to_path_buf(),
            })?;
        ObjectRemote::parse(url).map_err(TransferError::BadObjectRemote)
    }

    /// Found with git: the top, the common git dir, the recorded remote.
    fn find(repo: &Path) -> Result<RepoFacts, TransferError> {
        let Repo {
            top,
            common_dir: common,
            ..
        } = Repo::locate(repo).map_err(TransferError::NotInRepo)?;
        let lfs = common.join("lfs");
        // Not through a link planted in `.git`: objects are handed out here.
        let tmp = crate::safe_write::create_dirs(&common, Path::new("lfs/tmp"))
            .map_err(TransferError::LfsTmp)?;
        let attributes = top.join(".gitattributes");
        let stamp = stamp(&attributes);
        let settings = recorded(&top).map_err(TransferError::Settings)?;
        Ok(RepoFacts {
            top,
            lfs,
            tmp,
            remote: settings.remote,
            indexd: settings.indexd,
            authz: settings.authz,
            attributes,
            stamp,
        })
    }

    fn still_current(&self) -> bool {
        stamp(&self.attributes) == self.stamp
    }
}

/// The facts of the repos transfers were asked for, by the path asked with.
#[derive(Default)]
pub(super) struct FactsCache(Mutex<BTreeMap<PathBuf, RepoFacts>>);

impl FactsCache {
    pub(super) async fn get(&self, repo: &Path) -> Result<RepoFacts, TransferError> {
        let cached = self.lock().get(repo).cloned();
        if let Some(facts) = cached.filter(RepoFacts::still_current) {
            return Ok(facts);
        }
        let path = repo.to_path_buf();
        let facts = blocking(move || RepoFacts::find(&path)).await?;
        self.lock().insert(repo.to_path_buf(), facts.clone());
        Ok(facts)
    }

    /// A panic elsewhere cannot leave a half-written entry: take it over.
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, RepoFacts>> {
        crate::lock::lock(&self.0)
    }
}

/// What tells one state of `.gitattributes` from another: the object
/// remote it records decides where objects go and where the pre-push check
/// looks, so this is a trust decision, not a hint. The mtime alone misses
/// an edit that sets it back (`rsync -t`) or lands in the same clock tick;
/// the ctime moves with every write and cannot be set back, and the inode
/// changes when git or an editor replaces the file.
type Stamp = (u64, u64, u64, (i64, i64), (i64, i64));

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.len(),
        (m.mtime(), m.mtime_nsec()),
        (m.ctime(), m.ctime_nsec()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The object remote recorded in `.gitattributes` changed to another of
    /// the same length, the mtime set back: the cached facts are not current.
    #[test]
    fn an_attributes_edit_that_sets_the_mtime_back_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".gitattributes");
        std::fs::write(&path, "* drs-remote=s3://aaaa/x\n").unwrap();
        let before = stamp(&path);
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        std::io::Write::write_all(&mut &file, b"* drs-remote=s3://bbbb/x\n").unwrap();
        file.set_modified(mtime).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
        assert_ne!(stamp(&path), before);
    }
}
