//! The location of bytes just sent, set in their record and proven before
//! the push may succeed. Fence's multipart complete only forwards to the
//! store, and nothing there checks that what the store assembled is what
//! was sent: a store that dropped a part answers OK all the same. So once
//! the record names the location, it is read back through a URL Fence
//! signs (`GET /user/data/download/{did}`, then a GET of the first byte):
//! the store's size must be the object's, and its ETag the one the parts
//! sent make (their md5 for one PUT, `md5(md5s)-N` for N parts). A store
//! whose ETags are not md5s (SSE-KMS) is read whole instead, through DRS,
//! and hashed. Anything else takes the location out of the record again
//! (a record naming wrong bytes is never left behind) and fails the push;
//! the next push finds the record without a location and sends the bytes
//! again, in a new upload.

use super::{CommonsTarget, FenceSendError, Placed, Transfers};
use crate::lfs::Pointer;
use crate::registry::FenceStep;
use crate::stores::drs::Fence;

impl Transfers {
    /// Sets `placed.location` as the record's location and proves it; on
    /// a failed proof the location is taken out again and the upload
    /// forgotten, so the next push sends the bytes anew.
    pub(super) async fn publish(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        pointer: Pointer,
        placed: &Placed,
    ) -> Result<(), FenceSendError> {
        let guid = placed.guid.as_str();
        self.set_location(fence, guid, std::slice::from_ref(&placed.location))
            .await?;
        let why = match self.prove(target, fence, pointer, placed).await {
            Ok(()) => return Ok(()),
            Err(FenceSendError::NotPlaced { why, .. }) => why,
            Err(other) => return Err(other),
        };
        if let Err(e) = self.set_location(fence, guid, &[]).await {
            log::warn!("taking the location out of record {guid} again: {e}");
        }
        self.journal(target, pointer.oid, FenceStep::Blank, Some(guid), None)
            .await?;
        Err(FenceSendError::NotPlaced {
            guid: guid.to_string(),
            why,
        })
    }

    /// Makes the record `guid` name `urls` as its locations, whatever its
    /// revision was.
    async fn set_location(
        &self,
        fence: &Fence<'_>,
        guid: &str,
        urls: &[String],
    ) -> Result<(), FenceSendError> {
        // A stale revision (someone changed the record meanwhile) is read
        // again; a record changing under every try is not one to write.
        for _ in 0..3 {
            let Some(record) = fence.record(guid).await? else {
                return Err(FenceSendError::RecordGone { guid: guid.into() });
            };
            if record.urls == urls {
                return Ok(());
            }
            let Some(rev) = &record.rev else {
                return Err(FenceSendError::NoRev { guid: guid.into() });
            };
            if fence.set_urls(&record.did, rev, urls).await? {
                return Ok(());
            }
        }
        Err(FenceSendError::Contended { guid: guid.into() })
    }

    /// Whether the store holds, at the location the record `placed.guid`
    /// names, the bytes `placed` says were sent (see the module notes):
    /// [`FenceSendError::NotPlaced`] when it does not.
    async fn prove(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        pointer: Pointer,
        placed: &Placed,
    ) -> Result<(), FenceSendError> {
        let guid = placed.guid.as_str();
        let not_placed = |why: String| FenceSendError::NotPlaced {
            guid: guid.to_string(),
            why,
        };
        let url = fence.download_url(guid).await?;
        let probe = fence
            .probe(&format!("object {} in record {guid}", pointer.oid), &url)
            .await?;
        if probe.size != pointer.size {
            return Err(not_placed(format!(
                "the store holds {} bytes there, not the object's {}",
                probe.size, pointer.size
            )));
        }
        if probe.etag.as_deref() == Some(placed.etag.as_str()) {
            return Ok(());
        }
        log::info!(
            "object {}: the store's ETag for record {guid} is not the one its parts make ({}); reading it back whole",
            pointer.oid,
            probe.etag.as_deref().unwrap_or("none")
        );
        match self.record_proven(target, guid, pointer).await? {
            true => Ok(()),
            false => Err(not_placed(
                "the bytes the store holds there are not the object".into(),
            )),
        }
    }
}
