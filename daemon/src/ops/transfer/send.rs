//! Sending objects to an object remote: through the pool (taking the repo's
//! copy in), or straight from the repo's copy when the pool cannot take it,
//! skipping what the remote holds already.

use std::path::{Path, PathBuf};

use super::{TransferError, Transfers};
use crate::blocking;
use crate::pool::{Oid, PoolError};
use crate::remote::{ObjectRemote, Uploaded};

impl Transfers {
    /// The agent's upload: object `oid` of `size` bytes, whose repo copy is
    /// at `path`, to the repo's object remote; true when it was there.
    pub async fn upload(
        &self,
        repo: &Path,
        oid: Oid,
        size: u64,
        path: PathBuf,
    ) -> Result<bool, TransferError> {
        let layout = self.facts(repo).await?.object_remote(repo)?;
        self.send_local(&layout, oid, size, path).await
    }

    /// Sends object `oid` of `size` bytes, whose repo copy is at `path`, to
    /// `layout` unless it is there; true when it was. It goes through the
    /// pool (taking the repo's copy in), or, when the pool cannot take it (a
    /// full disk, a broken pool), straight from the repo's copy: the pool is
    /// a cache, and a push must not depend on it.
    pub async fn send_local(
        &self,
        layout: &ObjectRemote,
        oid: Oid,
        size: u64,
        path: PathBuf,
    ) -> Result<bool, TransferError> {
        match self.take_in(oid, size, Some(path.clone())).await {
            Ok(()) => self.send_from_pool(layout, oid).await,
            Err(e @ TransferError::Pool(_)) if path.is_file() => {
                log::warn!(
                    "object {oid}: the pool could not take it ({e}); uploading it from {}",
                    path.display()
                );
                self.send_file(layout, oid, &path).await
            }
            Err(e) => Err(e),
        }
    }

    /// Uploads the repo's copy of `oid` at `path` (checked against the oid
    /// on the way) to `layout` unless it is there; true when it was.
    async fn send_file(
        &self,
        layout: &ObjectRemote,
        oid: Oid,
        path: &Path,
    ) -> Result<bool, TransferError> {
        self.s3_ready(layout)?;
        let uploaded = self
            .remote
            .upload_file(path, layout, oid, self.upload)
            .await
            .map_err(TransferError::UploadFile)?;
        self.confirmed.record(layout, oid);
        Ok(matches!(uploaded, Uploaded::Skipped(_)))
    }

    /// Makes sure the pool holds `oid` of `size` bytes, adopting the repo's
    /// file at `path` when it does not (hashed on the way in). The pool's
    /// own copy is verified already and is not read again. `not_found` when
    /// neither has it, `invalid_argument` when the repo's copy is not the
    /// object, `internal` or `no_space` when the pool failed to take it.
    async fn take_in(
        &self,
        oid: Oid,
        size: u64,
        path: Option<PathBuf>,
    ) -> Result<(), TransferError> {
        let pool = self.pool.clone();
        let from = path.as_ref().map(|p| p.display().to_string());
        let len = blocking(move || match (pool.size(&oid)?, path) {
            (Some(len), _) => Ok(Some(len)),
            (None, Some(path)) if path.is_file() => {
                pool.adopt_file(&path, Some(&oid)).map(|put| Some(put.len))
            }
            (None, _) => Ok(None),
        })
        .await
        .map_err(|e| match e {
            PoolError::HashMismatch { .. } => TransferError::NotTheObject {
                from: from.unwrap_or_default(),
                source: e,
            },
            _ => TransferError::Pool(e),
        })?;
        match len {
            Some(len) if len == size => Ok(()),
            Some(len) => Err(TransferError::WrongSize { oid, len, size }),
            None => Err(TransferError::NotHere { oid }),
        }
    }

    /// Uploads pool entry `oid` to `layout` unless it is there; true when it
    /// was (or this daemon sent or saw it there in the last few minutes: the
    /// pre-push hook's batch is not checked again when git-lfs asks per
    /// object).
    async fn send_from_pool(&self, layout: &ObjectRemote, oid: Oid) -> Result<bool, TransferError> {
        if self.confirmed.holds(layout, oid) {
            return Ok(true);
        }
        self.s3_ready(layout)?;
        let uploaded = self
            .remote
            .upload_pooled(self.pool.clone(), layout, oid, self.upload)
            .await
            .map_err(TransferError::UploadPooled)?;
        self.confirmed.record(layout, oid);
        Ok(matches!(uploaded, Uploaded::Skipped(_)))
    }

    /// For an S3 remote, that the S3 client can be made: a setup that
    /// cannot make one is the caller's to fix (`invalid_argument`).
    fn s3_ready(&self, remote: &ObjectRemote) -> Result<(), TransferError> {
        if remote.s3().is_some() {
            self.remote.s3().map_err(TransferError::S3Setup)?;
        }
        Ok(())
    }
}
