//! An upload into a blank record of Fence's: where the commons will not
//! let the content's did be chosen, or names other content under it.
//! `POST /user/data/upload` (one PUT) or `multipart/init` without a guid
//! makes the record (did `PREFIX/uuid4`, key `{did}/{file_name}`); once the
//! bytes are in, the record is filled (`PUT /index/blank/{did}?rev=R`:
//! size, sha256, md5, location, authz), and its location proven
//! (`proof.rs`) or taken out again. A push killed on the way leaves a
//! blank record, which the next one finds in the registry and finishes.

use super::resume::Left;
use super::{claims, CommonsTarget, FenceSendError, Placed, Resume, Transfers, Upload};
use crate::lfs::Pointer;
use crate::registry::{FenceStep, FenceUpload};
use crate::stores::drs::{CommonsRecord, Completion, Fence};

impl Transfers {
    /// Sends `upload` into the blank record `left` names (resuming its
    /// multipart upload), or into a new one, and completes it.
    pub(super) async fn send_into_blank(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        upload: &mut Upload<'_>,
        left: Left<'_>,
    ) -> Result<(), FenceSendError> {
        let oid = upload.pointer.oid;
        // Recorded before anything is asked of Fence: a kill after Fence
        // made a blank record and before its guid is recorded leaves one
        // blank record nobody finishes, never a complete one without its
        // bytes. The upload a push before began stays recorded, with its
        // parts.
        self.journal(target, oid, FenceStep::Begun, left.guid, left.upload_id)
            .await?;
        let placed = self.send_through_fence(target, fence, upload, left).await?;
        self.journal(target, oid, FenceStep::Uploaded, Some(&placed.guid), None)
            .await?;
        self.complete_blank(target, fence, upload, &placed).await
    }

    /// Fills the blank record `placed.guid` with the size, hashes and
    /// location of the bytes just sent, and proves the location. A record
    /// filled before with this content (a push whose proof failed took its
    /// location out) only has its location set again.
    pub(super) async fn complete_blank(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        upload: &Upload<'_>,
        placed: &Placed,
    ) -> Result<(), FenceSendError> {
        let pointer = upload.pointer;
        let guid = placed.guid.clone();
        let Some(record) = fence.record(&guid).await? else {
            return Err(FenceSendError::RecordGone { guid });
        };
        if record.is_blank() {
            let Some(rev) = &record.rev else {
                return Err(FenceSendError::NoRev { guid });
            };
            let completion = Completion {
                size: pointer.size,
                sha256: pointer.oid.to_hex(),
                md5: placed.md5.clone(),
                urls: vec![placed.location.clone()],
                authz: target.authz.to_vec(),
            };
            fence.complete(&record.did, rev, &completion).await?;
        } else if !names(&record, pointer, &placed.md5) {
            return Err(FenceSendError::OtherContent { guid });
        }
        self.publish(target, fence, pointer, placed).await?;
        self.journal(target, pointer.oid, FenceStep::Done, Some(&guid), None)
            .await?;
        log::info!(
            "object {}: sent to the Gen3 commons {} as record {guid}",
            pointer.oid,
            target.commons.url()
        );
        Ok(())
    }

    /// What the registry says a push before left in the blank record
    /// `recorded` names: a record to finish (blank, or filled with this
    /// content and no location), one whose location is shown to hold the
    /// object, or nothing (a record gone or filled with other content is
    /// forgotten). The registry's word alone never makes it held: in a
    /// lab's registry any member may have written it.
    pub(super) async fn blank_resumable(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        pointer: Pointer,
        recorded: FenceUpload,
    ) -> Result<Resume, FenceSendError> {
        let oid = pointer.oid;
        let upload_id = recorded
            .upload_id
            .filter(|_| recorded.step <= FenceStep::Uploading);
        let Some(did) = recorded.did else {
            return Ok(Resume::Fresh);
        };
        match fence.record(&did).await? {
            Some(record)
                if record.is_blank() || (record.urls.is_empty() && claims(&record, pointer)) =>
            {
                log::info!("object {oid}: finishing the record {did} a push before began");
                Ok(Resume::Into {
                    guid: record.did,
                    upload_id,
                })
            }
            Some(record)
                if claims(&record, pointer)
                    && self.record_proven(target, &record.did, pointer).await? =>
            {
                self.journal(target, oid, FenceStep::Done, Some(&record.did), None)
                    .await?;
                Ok(Resume::Held)
            }
            _ => {
                self.journal_forget(target, oid).await?;
                Ok(Resume::Fresh)
            }
        }
    }
}

/// Whether a filled record names `pointer`'s content with `md5`.
fn names(record: &CommonsRecord, pointer: Pointer, md5: &str) -> bool {
    claims(record, pointer) && record.hash("md5").is_none_or(|theirs| theirs == md5)
}
