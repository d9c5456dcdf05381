//! A multipart upload through Fence begun, or resumed where a push before
//! left it: the bytes are moved by `remote/fence_upload.rs`; here, what
//! this node's journal (`registry/gen3/fence.rs`) says of the upload
//! before it goes and of each part the store took. A resumed upload sends
//! only the parts missing, into the same upload: nothing sent twice, and
//! no orphaned parts left in the commons' bucket (Fence has no call to
//! abort an upload). A recorded part counts as in the store only when the
//! md5 of the bytes read now is the ETag the store answered for it; an
//! upload that cannot be resumed (the store dropped it, or refused the
//! parts) is left, and a new one begun under the same record.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{CommonsTarget, FenceSendError};
use crate::blocking;
use crate::ops::transfer::Transfers;
use crate::pool::Oid;
use crate::registry::{FencePart, FenceStep};
use crate::remote::fence_upload::{self, OpenUpload, Recorder, Sent, Source};
use crate::stores::drs::Fence;
use crate::stores::Permanence;

/// What a push before left open: the blank record, and the upload begun
/// into it when it got that far.
#[derive(Default)]
pub(super) struct Left<'a> {
    pub guid: Option<&'a str>,
    pub upload_id: Option<&'a str>,
}

impl Transfers {
    /// Sends `source` as a multipart upload under `left.guid` (a blank
    /// record's guid, or the content's did no record holds yet, which
    /// Fence takes as given), else into a new blank record of Fence's;
    /// resuming the upload `left.upload_id` when the registry holds parts
    /// of it.
    pub(super) async fn multipart(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        source: &Source<'_>,
        left: Left<'_>,
    ) -> Result<Sent, FenceSendError> {
        let oid = source.pointer.oid;
        if let (Some(guid), Some(upload_id)) = (left.guid, left.upload_id) {
            if let Some(open) = self.resumable_upload(target, oid, guid, upload_id).await? {
                match self.send_parts(target, fence, source, &open).await {
                    Err(FenceSendError::Fence(e)) if e.permanence() == Permanence::Permanent => {
                        log::warn!(
                            "object {oid}: the multipart upload a push before began into record {guid} cannot be resumed ({e}); beginning a new one"
                        );
                    }
                    done => return done,
                }
            }
        }
        let start = fence.multipart_init(source.name, left.guid).await?;
        self.journal(
            target,
            oid,
            FenceStep::Uploading,
            Some(&start.guid),
            Some(&start.upload_id),
        )
        .await?;
        let open = OpenUpload {
            key: format!("{}/{}", start.guid, source.name),
            guid: start.guid,
            upload_id: start.upload_id,
            sent: BTreeMap::new(),
        };
        self.send_parts(target, fence, source, &open).await
    }

    /// The upload `upload_id` into record `guid` as the registry left it,
    /// when it recorded parts of it (with none, a new upload costs the
    /// same and leaves nothing unknown behind).
    async fn resumable_upload(
        &self,
        target: &CommonsTarget<'_>,
        oid: Oid,
        guid: &str,
        upload_id: &str,
    ) -> Result<Option<OpenUpload>, FenceSendError> {
        let (registry, commons, id) = (
            self.registry.clone(),
            target.key.clone(),
            upload_id.to_string(),
        );
        let parts =
            blocking(move || registry.fence_journal().fence_parts(&commons, oid, &id)).await?;
        let Some(key) = parts.first().map(|p| p.key.clone()) else {
            return Ok(None);
        };
        // The key is the registry's word (a lab's registry is every
        // member's to write): it must be under this very record.
        if !key.starts_with(&format!("{guid}/")) || parts.iter().any(|p| p.key != key) {
            return Ok(None);
        }
        self.journal(
            target,
            oid,
            FenceStep::Uploading,
            Some(guid),
            Some(upload_id),
        )
        .await?;
        Ok(Some(OpenUpload {
            guid: guid.to_string(),
            upload_id: upload_id.to_string(),
            key,
            sent: parts.into_iter().map(|p| (p.number, p.etag)).collect(),
        }))
    }

    /// The parts of `source` into `open`, each part the store took
    /// recorded in this node's journal.
    async fn send_parts(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        source: &Source<'_>,
        open: &OpenUpload,
    ) -> Result<Sent, FenceSendError> {
        let part_size = self.upload.part_size;
        let record = recorder(self, target, source.pointer.oid);
        Ok(fence_upload::send_parts(fence, source, open, part_size, record).await?)
    }
}

/// Records each part the store took of `oid`'s upload to `target`'s
/// commons in this node's journal; a failure to record costs only that
/// part's resending after a kill: logged.
fn recorder(transfers: &Transfers, target: &CommonsTarget<'_>, oid: Oid) -> Recorder {
    let (registry, commons) = (transfers.registry.clone(), target.key.clone());
    Arc::new(move |part: FencePart| {
        let number = part.number;
        let journal = registry.fence_journal();
        if let Err(e) = journal.fence_part_sent(&commons, oid, &part) {
            log::warn!("recording part {number} of object {oid} as sent: {e}");
        }
    })
}
