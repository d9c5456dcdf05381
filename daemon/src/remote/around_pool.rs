//! An object remote's object fetched around the pool: into a fresh file
//! the caller names the folder of, checked against the pointer's oid as it
//! is written. For when the pool cannot take the object (its disk full):
//! the pool is a cache, and git must get its bytes all the same.

use std::path::Path;

use super::{
    fetch_into_file, Fetch, FetchOptions, ObjectRemote, Origin, PointerFetchError, Remote,
};
use crate::pool::Oid;
use crate::stores::RemoteError;

impl Remote {
    /// Object `oid` of `size` bytes from `remote` into a fresh file in
    /// `dir` (created exclusively), returned only when its bytes hash to
    /// `oid`; removed otherwise. Nothing goes through the pool.
    pub async fn fetch_pointed_into(
        &self,
        remote: &ObjectRemote,
        oid: Oid,
        size: u64,
        dir: &Path,
        report: &(dyn Fn(u64) + Sync),
    ) -> Result<tempfile::TempPath, PointerFetchError> {
        let dir_remote = match remote {
            ObjectRemote::S3(layout) => {
                let client = self.s3().map_err(PointerFetchError::Setup)?;
                let key = layout.key(&oid);
                let req = Fetch {
                    origin: Origin::S3 {
                        client: &client,
                        bucket: &layout.bucket,
                        key: &key,
                    },
                    size,
                    // No ETag pinned: the sha256 is the check, of all of it.
                    etag: None,
                    last_modified: None,
                    expect: Some(oid),
                    md5: false,
                    part_sizes: &[],
                };
                let opts = FetchOptions::default();
                return Ok(fetch_into_file(dir, req, opts, report).await?);
            }
            ObjectRemote::Dir(d) => d.clone(),
            // Through DRS into the pool only: a DRS read resumes there.
            ObjectRemote::Gen3(c) => return Err(PointerFetchError::Setup(RemoteError::Protocol {
                op: "fetch",
                object: c.url(),
                why: "an object of a Gen3 commons is read into the pool, which cannot take it now"
                    .into(),
            })),
        };
        let to = dir.to_path_buf();
        let path = crate::blocking(move || dir_remote.fetch_into_file(&oid, size, &to))
            .await
            .map_err(super::object_remote::pointer_fetch_error)?;
        report(size);
        Ok(path)
    }
}
