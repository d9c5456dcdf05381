//! The transfer service: objects between repos, the pool and the repos'
//! object remotes. The git-lfs transfer agent's requests (download, upload),
//! the pre-push hook's batch and `drsctl clone`'s hydration and check-out all come here.
//!
//! [`Transfers`] is owned by the daemon's shared state and keeps what makes
//! thousands of small objects cheap: each repo's facts from git
//! (`facts.rs`), the objects lately confirmed in an object remote
//! (`confirmed.rs`), and one download per object at a time (`gates.rs`).
//! Sending is in `send.rs`, the pre-push work in `push.rs`, hydration in
//! `hydrate.rs`, the check-out from the pool in `checkout.rs`. Its
//! failures are [`TransferError`]s (`error.rs`).

// A `TransferError` carries its cause whole (a pool, store or Indexd error,
// some large) so the server can read the cause chain for a full disk; a
// failure is the rare path, and a transfer's time is I/O, not moves.
#![allow(clippy::result_large_err)]

mod around;
mod checkout;
mod confirmed;
mod elsewhere;
mod error;
mod facts;
mod gates;
mod gen3;
mod hydrate;

mod push;
mod send;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::blocking;
use crate::lfs::hydrate::export_to_temp;
use crate::ops::repos::RepoLocks;
use crate::pool::{Oid, Pool, PoolError};
use crate::registry::Registry;
use crate::remote::{Remote, UploadOptions};

pub use error::TransferError;
pub use facts::RepoFacts;

/// Objects in flight at once in a batch (pre-push, hydrate): RGW's
/// small-object rate stops growing past about 32 (docs/benchmarks.md).
pub const PARALLEL: usize = 32;

/// Small objects per batch (hydrate, pre-push): each batch goes into the
/// pool in one transaction, and its objects are read once.
pub const SMALL_BATCH: usize = 512;

/// The daemon's transfers and what they remember between requests.
pub struct Transfers {
    pool: Arc<Pool>,
    remote: Arc<Remote>,
    /// Foreign objects (added by URL), which a push copies server-side.
    registry: Arc<Registry>,
    /// Held while writing in a repo's `.git` (hydration, check-out).
    locks: Arc<RepoLocks>,
    upload: UploadOptions,
    facts: facts::FactsCache,
    confirmed: confirmed::Confirmed,
    gates: gates::Gates,
    /// md5s of objects bound for a Gen3 commons, hashed ahead of the push.
    md5s: Arc<gen3::Md5Ahead>,
}

/// Where the object a download hands out came from (the wire's enum).
pub use drsd_proto::ObjectSource;

impl Transfers {
    pub fn new(
        pool: Arc<Pool>,
        remote: Arc<Remote>,
        registry: Arc<Registry>,
        locks: Arc<RepoLocks>,
        upload: UploadOptions,
    ) -> Transfers {
        Transfers {
            pool,
            remote,
            registry,
            locks,
            upload,
            facts: Default::default(),
            confirmed: Default::default(),
            gates: Default::default(),
            md5s: Default::default(),
        }
    }

    /// The object remotes and DRS servers taken at their word
    /// (`trust_claims`), for `status`.
    pub fn trusted_sources(&self) -> Vec<String> {
        self.remote.trusted_sources()
    }

    /// Uploads to Gen3 commons begun and not finished, for `status`; none
    /// when the registry cannot be read (logged: status still answers).
    pub async fn unfinished_commons_uploads(&self) -> Vec<drsd_proto::CommonsUploadLine> {
        let registry = self.registry.clone();
        let read = blocking(move || registry.fence_journal().fence_unfinished());
        // Status answers at once, even when a team's database hangs.
        let wait = crate::ops::workers::STATUS_WAIT;
        let Ok(read) = tokio::time::timeout(wait, read).await else {
            log::warn!(
                "status: the unfinished commons uploads: no answer within {}s",
                wait.as_secs()
            );
            return Vec::new();
        };
        match read {
            Ok(open) => open
                .into_iter()
                .map(|(commons, up)| drsd_proto::CommonsUploadLine {
                    commons,
                    oid: up.oid,
                    did: up.did,
                    step: up.step.to_string(),
                })
                .collect(),
            Err(e) => {
                log::warn!("status: {e}");
                Vec::new()
            }
        }
    }

    /// The repo's facts, from git the first time and after `.gitattributes`
    /// changed.
    pub async fn facts(&self, repo: &Path) -> Result<RepoFacts, TransferError> {
        self.facts.get(repo).await
    }

    /// Object `oid` of `size` bytes for git-lfs: in the pool (fetched from
    /// the repo's object remote when it is not), then handed out as a fresh
    /// file in the repo's `lfs/tmp` for git-lfs to rename into place. A pool
    /// entry found corrupt on its way out has been moved aside: the object
    /// is fetched again, and if that fails too, the error says both. A pool
    /// that cannot take the object (`no_space`) is gone around: the object
    /// is fetched straight into `lfs/tmp`, checked against its oid.
    pub async fn download(
        &self,
        repo: &Path,
        oid: Oid,
        size: u64,
        report: &(dyn Fn(u64) + Sync),
    ) -> Result<(PathBuf, ObjectSource), TransferError> {
        let facts = self.facts(repo).await?;
        let mut from = match self.fetch(repo, &facts, oid, size, report).await {
            // The pool is a cache: git gets the bytes around it.
            Err(full) if full.is_out_of_space() => {
                let pointer = crate::lfs::Pointer { oid, size };
                let file = self
                    .fetch_around_pool(repo, &facts, pointer, full, report)
                    .await?;
                let path = file.keep().map_err(TransferError::HandOut)?;
                return Ok((path, ObjectSource::Remote));
            }
            fetched => fetched?,
        };
        let mut exported = self.export(oid, &facts.tmp).await?;
        if let Err(PoolError::Corrupt { .. }) = &exported {
            let refetched = self.fetch(repo, &facts, oid, size, report).await;
            from = match (refetched, exported) {
                (Ok(from), _) => from,
                (Err(then), Err(corrupt)) => {
                    return Err(TransferError::Refetch {
                        corrupt,
                        then: Box::new(then),
                    })
                }
                (Err(then), Ok(_)) => return Err(then),
            };
            exported = self.export(oid, &facts.tmp).await?;
        }
        let exported = exported.map_err(TransferError::Export)?;
        let path = exported.ok_or(TransferError::LeftThePool { oid })?;
        Ok((path, from))
    }

    /// Makes sure the pool holds `oid`: there already, or fetched from the
    /// repo's object remote, or else from where the registry or the repo's
    /// Indexd says it is (`elsewhere.rs`). One download per object at a
    /// time: a second request waits, then finds the object in the pool.
    pub async fn fetch(
        &self,
        repo: &Path,
        facts: &RepoFacts,
        oid: Oid,
        size: u64,
        report: &(dyn Fn(u64) + Sync),
    ) -> Result<ObjectSource, TransferError> {
        let _turn = self.gates.turn(oid).await;
        let pool = self.pool.clone();
        let held = blocking(move || pool.size(&oid))
            .await
            .map_err(TransferError::Pool)?;
        if held == Some(size) {
            return Ok(ObjectSource::Pool);
        }
        let missing = match facts.object_remote(repo) {
            Ok(objects) => match self
                .remote
                .fetch_pointed(self.pool.clone(), &objects, oid, size, report)
                .await
            {
                Ok(()) => return Ok(ObjectSource::Remote),
                Err(e) if elsewhere::is_missing(&e) => TransferError::Fetch(e),
                Err(e) => return Err(TransferError::Fetch(e)),
            },
            // No object remote: only elsewhere can have it.
            Err(none) => none,
        };
        match self.fetch_elsewhere(facts, oid, size, report).await {
            Ok(()) => Ok(ObjectSource::Remote),
            Err(None) => Err(missing),
            Err(Some(tried)) => Err(TransferError::Elsewhere {
                missing: Box::new(missing),
                tried,
            }),
        }
    }

    /// Links (else copies) the pool's entry to a fresh random name in `tmp`,
    /// created exclusively (git-lfs renames it into place), checked against
    /// its oid first (a corrupt entry is moved aside: the error says so).
    async fn export(
        &self,
        oid: Oid,
        tmp: &Path,
    ) -> Result<Result<Option<PathBuf>, PoolError>, TransferError> {
        let (pool, tmp) = (self.pool.clone(), tmp.to_path_buf());
        blocking(move || match export_to_temp(&pool, &oid, &tmp) {
            Ok(Some(path)) => path
                .keep()
                .map(|p| Ok(Some(p)))
                .map_err(TransferError::HandOut),
            Ok(None) => Ok(Ok(None)),
            Err(e) => Ok(Err(e)),
        })
        .await
    }
}
