//! An upload under the content's own did (UUIDv5 over `"<project>:<sha256>"`,
//! as calypr/git-drs derives it), as a commons runs Fence today: since
//! Fence 10.2 (uc-cdis/fence 391865be, `BlankIndex.__init__` reading
//! `index_document["did"]`) an upload begun under a guid needs a record
//! Indexd holds, and Fence never fills it. So the record comes first:
//!
//! 1. registered (`POST /index/`) with the content's size, sha256 and md5
//!    and **no location**: a claim of content, which no reader (this one
//!    included) takes for presence, since there is nothing to read;
//! 2. the bytes go up into it through Fence (`GET /user/data/upload/{did}`
//!    for one PUT, `multipart/init {guid: did}` for more), hashed as they
//!    go;
//! 3. its location is set (`PUT /index/{did}?rev=R`) and proven
//!    (`proof.rs`), or taken out again.
//!
//! A record of the did that claims this content without a location is an
//! upload begun and not finished (this machine's, another's, git-drs's):
//! the bytes go into it. One that names a location counts once its bytes
//! are shown to be the object. One that names other content, or a commons
//! that will not let the did be chosen (403, 404), sends the bytes into a
//! blank record of Fence's instead (`blank.rs`).

use super::{claims, CommonsTarget, FenceSendError, Own, Transfers, Upload};
use crate::registry::FenceStep;
use crate::stores::drs::{CommonsRecord, Completion, Fence, Registration};

impl Transfers {
    /// Sends `upload` under the content's did `own_did` (see the module
    /// notes), resuming the upload the registry says a push before began
    /// there.
    pub(super) async fn under_own_did(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        upload: &mut Upload<'_>,
        own_did: &str,
    ) -> Result<Own, FenceSendError> {
        let pointer = upload.pointer;
        let oid = pointer.oid;
        let record = match fence.record(own_did).await? {
            Some(record) => record,
            None => match self.register_claim(target, fence, upload, own_did).await? {
                Ok(record) => record,
                Err(refused) => return Ok(refused),
            },
        };
        if !claims(&record, pointer) {
            return Ok(Own::Refused(format!(
                "the record {} (the did of this content in project {}) names other content (sha256 {}, size {})",
                record.did,
                target.project,
                record.hash("sha256").unwrap_or_else(|| "none".into()),
                record.size.map_or("none".into(), |s| s.to_string()),
            )));
        }
        if !record.urls.is_empty() {
            // Complete already: held once its bytes are shown to be it.
            return match self.record_proven(target, &record.did, pointer).await? {
                true => {
                    self.journal(target, oid, FenceStep::Done, Some(&record.did), None)
                        .await?;
                    Ok(Own::Held)
                }
                false => Ok(Own::Refused(format!(
                    "the record {} names this content, but its location holds other bytes",
                    record.did
                ))),
            };
        }
        // A claim without a location: registered just now, or an upload
        // begun and not finished. Its md5, if it names one, must be ours.
        let md5 = self.md5_ahead(upload).await?;
        if record.hash("md5").is_some_and(|theirs| theirs != md5) {
            return Ok(Own::Refused(format!(
                "the record {} claims this content's sha256 with another md5",
                record.did
            )));
        }
        self.send_into_claim(target, fence, upload, &record).await?;
        Ok(Own::Sent)
    }

    /// Registers the claim of `upload`'s content under `own_did`; the
    /// record Indexd then holds there (ours, or one registered at once by
    /// someone else), or why the commons would not have it.
    async fn register_claim(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        upload: &mut Upload<'_>,
        own_did: &str,
    ) -> Result<Result<CommonsRecord, Own>, FenceSendError> {
        let pointer = upload.pointer;
        let md5 = self.md5_ahead(upload).await?;
        self.journal(target, pointer.oid, FenceStep::Begun, Some(own_did), None)
            .await?;
        let claim = Completion {
            size: pointer.size,
            sha256: pointer.oid.to_hex(),
            md5,
            urls: Vec::new(),
            authz: target.authz.to_vec(),
        };
        match fence.register(own_did, upload.name, &claim).await? {
            Registration::Made | Registration::Taken => {}
            Registration::Refused { status } => {
                return Ok(Err(Own::Refused(format!(
                    "the Gen3 commons {} did not let a record be registered under the content's did {own_did} (HTTP {status})",
                    target.commons.url()
                ))))
            }
        }
        match fence.record(own_did).await? {
            Some(record) => Ok(Ok(record)),
            None => Err(FenceSendError::RecordGone {
                guid: own_did.to_string(),
            }),
        }
    }

    /// Sends the bytes into `record`, the claim of this content without a
    /// location, then sets and proves its location.
    async fn send_into_claim(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        upload: &mut Upload<'_>,
        record: &CommonsRecord,
    ) -> Result<(), FenceSendError> {
        let oid = upload.pointer.oid;
        let did = record.did.as_str();
        // The multipart upload a push before began here, with its parts.
        let recorded = self.journal_read(target, oid).await?;
        let upload_id = recorded
            .filter(|r| r.did.as_deref() == Some(did) && r.step == FenceStep::Uploading)
            .and_then(|r| r.upload_id);
        if upload_id.is_none() {
            self.journal(target, oid, FenceStep::Blank, Some(did), None)
                .await?;
        }
        let left = super::resume::Left {
            guid: Some(did),
            upload_id: upload_id.as_deref(),
        };
        let placed = self.send_through_fence(target, fence, upload, left).await?;
        self.journal(target, oid, FenceStep::Uploaded, Some(&placed.guid), None)
            .await?;
        if placed.guid != did {
            // A Fence before 10.2 ignores the guid and makes a blank record
            // of its own: that one is completed, and the claim stays one.
            log::warn!(
                "object {oid}: the Gen3 commons {} put the upload under a record of its own ({}) rather than {did}; completing that one",
                target.commons.url(),
                placed.guid
            );
            return self.complete_blank(target, fence, upload, &placed).await;
        }
        self.publish(target, fence, upload.pointer, &placed).await?;
        self.journal(target, oid, FenceStep::Done, Some(did), None)
            .await?;
        log::info!(
            "object {oid}: sent to the Gen3 commons {} as record {did} (the content's did)",
            target.commons.url()
        );
        Ok(())
    }
}
