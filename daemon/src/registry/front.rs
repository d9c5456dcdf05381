//! [`Registry`]: what every service holds. An engine
//! ([`RegistryEngine`], SQLite by default) for the records; the repos'
//! mirrors, which are files in each repo and stay the daemon's whatever the
//! engine (a change reaches the engine first, then the mirror); and the
//! journal of uploads through Fence, which is the node's own whatever the
//! engine (`gen3/mod.rs` says why): the SQLite engine's own tables, or a
//! SQLite file in the node's state folder beside a team's database.

use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use super::engine::{RegistryEngine, SqliteRegistry};
use super::gen3::FenceUploads;
use super::mirror::Mirrors;
use super::{Entry, RegistryError};
use crate::stores::{MultipartUpload, SentObject, UploadJournal};

/// The registry: an engine and the mirrors this daemon wrote. Every
/// operation of the engine is the registry's (it dereferences to the
/// engine); what spans the engine and the mirrors is here.
pub struct Registry {
    engine: Arc<dyn RegistryEngine>,
    /// This node's uploads through Fence (never a team's database).
    fence: Arc<dyn FenceUploads + Send + Sync>,
    /// The repos' mirrors this daemon wrote (see [`mirror`](super::mirror)).
    mirrors: Mirrors,
}

impl Registry {
    /// Opens (or creates) the SQLite registry at `path`, private to the user
    /// (it holds signed URLs): 0600 files in a 0700 folder.
    pub fn open(path: &Path) -> Result<Registry, RegistryError> {
        let own = Arc::new(SqliteRegistry::open(path)?);
        Ok(Registry::with_engine(own.clone(), own))
    }

    /// A registry over any engine, the node's Fence journal in `fence`.
    pub fn with_engine(
        engine: Arc<dyn RegistryEngine>,
        fence: Arc<dyn FenceUploads + Send + Sync>,
    ) -> Registry {
        Registry {
            engine,
            fence,
            mirrors: Mirrors::default(),
        }
    }

    /// This node's journal of uploads through a Gen3 commons' Fence.
    pub fn fence_journal(&self) -> &dyn FenceUploads {
        &*self.fence
    }

    /// Records `entries` of the repo at `repo` and brings its mirror (in
    /// the common git folder `common`) up to date with them and with the
    /// entries at `touched` (paths whose object the registry learnt more
    /// of: a content oid, an md5): the one way every change reaches both.
    /// The registry first: a kill between the two leaves the mirror a
    /// change behind, which the next daemon's first write mends.
    pub fn record_and_mirror(
        &self,
        repo: &Path,
        common: &Path,
        entries: &[Entry],
        touched: &[&str],
    ) -> Result<(), RegistryError> {
        self.record(repo, entries)?;
        let mut paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        paths.extend(touched);
        paths.sort_unstable();
        paths.dedup();
        self.mirrors.changed(
            common,
            || self.entries_at(repo, &paths),
            || self.for_repo(repo),
        )
    }

    /// Rewrites `repo`'s mirror (in its common git folder `common`) whole.
    pub fn rewrite_mirror(&self, repo: &Path, common: &Path) -> Result<(), RegistryError> {
        self.mirrors.rewrite(common, || self.for_repo(repo))
    }
}

impl Deref for Registry {
    type Target = dyn RegistryEngine;

    fn deref(&self) -> &Self::Target {
        &*self.engine
    }
}

/// The uploads' journal a push writes through: the engine's records of
/// open uploads and sent objects. A failure to record is logged, not fatal.
impl UploadJournal for Registry {
    fn started(
        &self,
        upload: &MultipartUpload,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.upload_started(upload)?)
    }

    fn ended(&self, upload: &MultipartUpload) {
        if let Err(e) = self.upload_ended(upload) {
            // Harmless: the next start aborts it again, and an upload that
            // is gone counts as aborted.
            log::warn!("forgetting upload {}: {e}", upload.upload_id);
        }
    }

    fn sent(&self, object: &SentObject) {
        if let Err(e) = self.record_sent(object) {
            log::warn!(
                "recording s3://{}/{} as sent: {e}",
                object.bucket,
                object.key
            );
        }
    }

    fn sent_at(&self, endpoint: &str, bucket: &str, key: &str) -> Option<SentObject> {
        self.sent_object(endpoint, bucket, key)
            .inspect_err(|e| log::warn!("looking up s3://{bucket}/{key}: {e}"))
            .ok()
            .flatten()
    }
}
