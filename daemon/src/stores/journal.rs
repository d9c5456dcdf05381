//! A journal of multipart uploads in flight, so an upload a killed daemon
//! left behind can be aborted at the next start: its parts would otherwise
//! stay in the bucket forever, unseen in any listing of objects.
//! The daemon keeps it in its registry (`registry::uploads`).

use super::S3Client;

/// One multipart upload: where, and the id the store gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipartUpload {
    /// The S3 endpoint (an id means nothing to another store).
    pub endpoint: String,
    pub bucket: String,
    pub key: String,
    pub upload_id: String,
}

/// Where [`S3Client`] records the uploads it begins and ends.
pub trait UploadJournal: Send + Sync {
    /// Called after the store gave the upload its id, before the first
    /// part: an error aborts the upload (it could not be found again).
    fn started(
        &self,
        upload: &MultipartUpload,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
    /// Called once the upload is completed or aborted.
    fn ended(&self, upload: &MultipartUpload);
    /// Called once an object is shown to be at `object.key` with
    /// `object.etag`: sent by this daemon (the ETag the store answered), or
    /// found there and proven (`proof.rs`). A failure to record costs only
    /// a proof again later.
    fn sent(&self, _object: &SentObject) {}
    /// What was recorded of the object at `key` in `bucket` of `endpoint`.
    fn sent_at(&self, _endpoint: &str, _bucket: &str, _key: &str) -> Option<SentObject> {
        None
    }
}

/// An object shown to be at a key: the content oid, its size and the
/// store's ETag for those bytes (without quotes). While the key answers
/// the same ETag, it holds the same bytes: a store gives other bytes
/// another ETag (an MD5 one differs unless MD5 is broken by a second
/// preimage; RGW and S3 give every write a new ETag otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentObject {
    pub endpoint: String,
    pub bucket: String,
    pub key: String,
    pub oid: crate::pool::Oid,
    pub size: u64,
    pub etag: String,
}

/// What [`abort_left_over`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LeftOver {
    /// Aborted now, or gone already.
    pub aborted: usize,
    /// Kept for the next start: the store could not be asked, or the
    /// upload is on another endpoint than this client's.
    pub kept: usize,
}

/// Aborts each upload in `uploads` (recorded by an earlier daemon and never
/// ended) and tells `journal` that it ended; an upload the store no longer
/// knows counts as aborted. Those the store cannot be asked about now stay
/// recorded, for the next start.
pub async fn abort_left_over(
    client: &S3Client,
    journal: &dyn UploadJournal,
    uploads: Vec<MultipartUpload>,
) -> LeftOver {
    let mut done = LeftOver::default();
    for upload in uploads {
        if upload.endpoint != client.endpoint() {
            done.kept += 1;
            continue;
        }
        match client
            .abort_upload(&upload.bucket, &upload.key, &upload.upload_id)
            .await
        {
            Ok(()) => {
                journal.ended(&upload);
                done.aborted += 1;
            }
            Err(e) => {
                log::warn!("aborting a left-over upload: {e}; tried again at the next start");
                done.kept += 1;
            }
        }
    }
    done
}
