//! Pushing to a Gen3 commons as the repo's object remote
//! (`drs-remote=gen3+https://host`, `remote/commons.rs`). For each object
//! the push introduces:
//!
//! - a record of the commons' Indexd with its sha256, size and a location
//!   is the object held once its bytes, read through DRS, hash to the oid
//!   (or this daemon proved that very record, or the user trusts the
//!   commons' claims): nothing is sent. One whose bytes cannot be read
//!   fails the push with the reason, rather than sending them again;
//! - else a record of its md5 and size naming no sha256 (most Gen3 records)
//!   is the object once its bytes, read through DRS (Fence-signed), hash to
//!   the oid: then a version of it carrying the sha256 is added (`POST
//!   /index/{did}`, same `baseid`), and nothing is sent;
//! - otherwise the bytes go up through Fence's signed URLs under the
//!   content's own did (UUIDv5 over `"<project>:<sha256>"`, as
//!   calypr/git-drs derives it, so both tools find each other's records):
//!   the record is registered first, naming the content's size, sha256
//!   and md5 and no location (Fence 10.2 and later sign an upload under a
//!   guid only for a record Indexd holds), the bytes go into it, and its
//!   location is set once they are in (`own_did.rs`). A record of that did
//!   claiming this content without a location is an upload begun and not
//!   finished, by this machine or another: the bytes go into it. Where the
//!   commons will not let the did be chosen, or it names other content,
//!   the bytes go into a blank record of Fence's, which is then filled
//!   (`blank.rs`);
//! - either way the location is read back through a URL Fence signs before
//!   the push succeeds: the store's size and ETag must be those of the
//!   parts sent, or the location is taken out again and the push fails
//!   (`proof.rs`). A record never names a location that does not hold
//!   the object, and no ref goes out for an object the commons lacks.
//!
//! Each step is recorded in the registry before it is taken
//! (`registry/fence_uploads.rs`): a push killed anywhere leaves at most a
//! record without a location (the content's claim, or Fence's blank one)
//! and the upload begun, which the next push finds and finishes.
//! Signed URLs and the token never reach a log line or an error: errors
//! name the record.

mod ahead;
mod blank;
mod multipart;
mod own_did;
mod proof;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};
use md5::{Digest, Md5};

use super::push::{PushFailure, PushOutcome, PushRefusal};
use super::{TransferError, Transfers, PARALLEL};
pub use ahead::Md5Ahead;

use crate::blocking;
use crate::lfs::hydrate::object_path;
use crate::lfs::{Pointer, Pushed};
use crate::pool::{Blob, Oid, PoolError};
use crate::registry::{Entry, FenceStep, FenceUpload, RegistryError};
use crate::remote::{project_of, FetchError, Gen3Commons, ObjectRemote, ResolveError};
use crate::stores::drs::{content_did, CommonsRecord, DrsClient, DrsError, Fence, IndexdClient};
use crate::stores::{ObjectUrl, SecretUrl};
use drsd_proto::PushReport;

/// Why an object could not be pushed to a Gen3 commons now; pushing again
/// may succeed. Each names the commons or the record, never a signed URL.
#[derive(Debug, thiserror::Error)]
pub enum CommonsPushError {
    /// Indexd could not be asked whether it holds the object (`by`: how).
    #[error("the Gen3 commons {commons} could not be asked whether it holds the object{by}: {error}; nothing was sent")]
    Ask {
        commons: String,
        by: &'static str,
        #[source]
        error: DrsError,
    },
    /// An md5-only record was shown to be the object, and publishing its
    /// sha256 failed.
    #[error("the Gen3 commons holds object {oid} as {did} (md5 only; its bytes were shown here to have the sha256), but adding a version of it that names the sha256 failed: {error}; nothing was sent, push again")]
    Version {
        oid: Oid,
        did: String,
        #[source]
        error: DrsError,
    },
    /// The object's bytes here could not be read.
    #[error("reading object {oid} here: {error}")]
    Read {
        oid: Oid,
        #[source]
        error: PoolError,
    },
    /// A record naming the object could not be read to show it holds it:
    /// nothing is sent again on a guess (that would make another record).
    #[error("the Gen3 commons {commons} has a record of object {oid} ({did}), but its bytes could not be read to show they are the object: {error}; nothing was sent, push again")]
    Unreadable {
        commons: String,
        oid: Oid,
        did: String,
        #[source]
        error: Box<ResolveError>,
    },
    /// Sending it through Fence, or completing its record.
    #[error("could not be sent to the Gen3 commons {commons}: {error}; push again to finish it")]
    Send {
        commons: String,
        #[source]
        error: FenceSendError,
    },
}

/// What stopped an upload through Fence (see the module notes).
#[derive(Debug, thiserror::Error)]
pub enum FenceSendError {
    #[error(transparent)]
    Fence(#[from] DrsError),
    #[error("recording the upload's step first: {0}; nothing more was done")]
    Journal(#[from] RegistryError),
    #[error("reading the object for its upload: {0}")]
    Read(#[from] PoolError),
    #[error("the bytes read for the upload are not object {oid} (sha256 {got}, or another md5): not sent")]
    NotTheObject { oid: Oid, got: Oid },
    #[error("the hashing of object {oid} stopped before its end (the daemon is stopping): not completed")]
    HashingStopped { oid: Oid },
    #[error("the signed URL Fence gave for record {guid} names no bucket and key to record")]
    NoLocation { guid: String },
    #[error("the store answered no ETag for part {number} of object {oid}")]
    NoEtag { number: u32, oid: Oid },
    #[error("the record {guid} is gone after its upload")]
    RecordGone { guid: String },
    #[error("the record {guid} was completed by someone else with other content")]
    OtherContent { guid: String },
    #[error("the record {did} (this content's did) was registered by someone else meanwhile, and its bytes could not be shown to be the object")]
    TakenMeanwhile { did: String },
    #[error("the record {guid} has no rev to complete it by")]
    NoRev { guid: String },
    #[error("the store answered for part {number} of object {oid} an ETag that is not the md5 of the bytes sent")]
    PartNotStored { number: u32, oid: Oid },
    #[error("the record {guid} was read back after the upload, and {why}: its location was taken out again")]
    NotPlaced { guid: String, why: String },
    #[error("the record {guid} changed under every try to set its location")]
    Contended { guid: String },
    #[error("the record {did}'s bytes could not be read to show they are object {oid}: {error}")]
    Unreadable {
        did: String,
        oid: Oid,
        #[source]
        error: Box<ResolveError>,
    },
}

/// The commons and what one push needs of it.
pub struct CommonsTarget<'a> {
    pub commons: &'a Gen3Commons,
    /// The registry's key of this commons (`gen3+https://host`).
    key: String,
    drs: Arc<DrsClient>,
    indexd: IndexdClient,
    authz: &'a [String],
    /// `P-Q` of `/programs/P/projects/Q`: the did's namespace.
    project: String,
    lfs_objects: &'a Path,
}

/// How one object stands with the commons after the push.
enum Pushed3 {
    /// Held already (by sha256, by md5 with its bytes shown, or under the
    /// content's did): nothing sent.
    Held,
    /// Sent through Fence, its record completed.
    Sent,
    Not(Box<PushOutcome>),
}

impl Transfers {
    /// The pre-push of a repo whose object remote is a Gen3 commons: each
    /// object in `objects` held, or sent through Fence (see the module
    /// notes), `PARALLEL` at a time.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn pre_push_commons(
        &self,
        commons: &Gen3Commons,
        layout: &ObjectRemote,
        authz: &[String],
        lfs_objects: &Path,
        objects: Vec<Pushed>,
        foreign: &BTreeMap<Oid, Entry>,
        superseded: &HashSet<Oid>,
        mut report: PushReport,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<PushReport, TransferError> {
        let drs = self
            .remote
            .commons_client(commons)
            .map_err(TransferError::Commons)?;
        let project = project_of(authz).ok_or_else(|| TransferError::CommonsWithoutProject {
            commons: commons.url(),
            root: commons.root().to_string(),
        })?;
        let indexd = self
            .remote
            .indexd(&commons.indexd())
            .map_err(TransferError::Drs)?;
        let target = CommonsTarget {
            commons,
            key: commons.url(),
            drs,
            indexd,
            authz,
            project,
            lfs_objects,
        };
        let total = report.objects;
        let mut done = 0;
        let mut results = stream::iter(objects)
            .map(|pushed| {
                let target = &target;
                async move {
                    let oid = pushed.pointer.oid;
                    let outcome = match superseded.contains(&oid) {
                        true => Pushed3::Not(Box::new(PushOutcome::Present)),
                        false => {
                            self.push_to_commons(target, foreign.get(&oid), &pushed)
                                .await
                        }
                    };
                    (pushed, outcome)
                }
            })
            .buffer_unordered(PARALLEL);
        while let Some((pushed, outcome)) = results.next().await {
            let outcome = match outcome {
                Pushed3::Held => {
                    report.in_indexd += 1;
                    self.confirmed.record(layout, pushed.pointer.oid);
                    PushOutcome::Present
                }
                Pushed3::Sent => {
                    report.registered += 1;
                    self.confirmed.record(layout, pushed.pointer.oid);
                    PushOutcome::Uploaded
                }
                Pushed3::Not(outcome) => *outcome,
            };
            super::push::tally(&mut report, pushed, outcome);
            done += 1;
            progress(done, total);
        }
        Ok(report)
    }

    /// One object to the commons; see the module notes.
    async fn push_to_commons(
        &self,
        target: &CommonsTarget<'_>,
        foreign: Option<&Entry>,
        pushed: &Pushed,
    ) -> Pushed3 {
        let pointer = pushed.pointer;
        if let Some(entry) = foreign.filter(|e| e.is_provisional()) {
            let url = entry.object.url.to_string();
            return Pushed3::Not(Box::new(PushOutcome::Refused(PushRefusal::Provisional {
                url,
            })));
        }
        match self.held_in_commons(target, pointer).await {
            Err(why) => return Pushed3::Not(Box::new(PushOutcome::Failed(why.into()))),
            Ok(true) => return Pushed3::Held,
            Ok(false) => {}
        }
        let blob = match self.local_blob(target, foreign, pointer).await {
            Ok(blob) => Arc::new(blob),
            Err(outcome) => return Pushed3::Not(Box::new(outcome)),
        };
        let md5 = match self.md5_if_asked(target, pointer, &blob).await {
            Ok(md5) => md5,
            Err(why) => return Pushed3::Not(Box::new(PushOutcome::Failed(why.into()))),
        };
        if let Some(md5) = &md5 {
            match self.commons_md5_held(target, pointer, md5).await {
                Err(why) => return Pushed3::Not(Box::new(PushOutcome::Failed(why.into()))),
                Ok(true) => return Pushed3::Held,
                Ok(false) => {}
            }
        }
        let name = file_name(pushed);
        match self
            .upload_through_fence(target, pointer, blob, md5, &name)
            .await
        {
            Ok(true) => Pushed3::Sent,
            Ok(false) => Pushed3::Held,
            Err(error) => Pushed3::Not(Box::new(PushOutcome::Failed(
                CommonsPushError::Send {
                    commons: target.commons.url(),
                    error,
                }
                .into(),
            ))),
        }
    }

    /// Whether the commons holds `pointer`'s content under a record naming
    /// its sha256 and size and a location; `Err` when it cannot be asked,
    /// or such a record's bytes cannot be read. A record is a claim
    /// (whoever may write the project's records chose its hashes and its
    /// location, DESIGN.md "Trust"), and one without a location is an
    /// upload begun, never the object held: a record counts when the user
    /// trusts the commons at its word (`trust_claims` names
    /// `gen3+https://host`), when this daemon completed and proved that
    /// very record (its Fence journal, always the node's own, says `done`
    /// under its did),
    /// or once its bytes, read through DRS, hash to the oid.
    async fn held_in_commons(
        &self,
        target: &CommonsTarget<'_>,
        pointer: Pointer,
    ) -> Result<bool, CommonsPushError> {
        let records = target
            .indexd
            .by_sha256(pointer.oid)
            .await
            .map_err(|error| CommonsPushError::Ask {
                commons: target.commons.url(),
                by: "",
                error,
            })?;
        let dids: Vec<String> = records
            .into_iter()
            .filter(|r| r.size == Some(pointer.size) && !r.urls.is_empty())
            .map(|r| r.did)
            .collect();
        if dids.is_empty() {
            return Ok(false);
        }
        if self.remote.trusts(&target.key) {
            return Ok(true);
        }
        match self.journal_read(target, pointer.oid).await {
            Ok(Some(sent)) if sent.step == FenceStep::Done => {
                if sent.did.is_some_and(|did| dids.contains(&did)) {
                    return Ok(true);
                }
            }
            Ok(_) => {}
            // Then the record is read instead: slower, as sure.
            Err(e) => log::warn!("object {}: {e}", pointer.oid),
        }
        for did in &dids {
            match self.record_proven(target, did, pointer).await {
                Ok(true) => return Ok(true),
                Ok(false) => {}
                Err(FenceSendError::Unreadable { did, oid, error }) => {
                    return Err(CommonsPushError::Unreadable {
                        commons: target.commons.url(),
                        oid,
                        did,
                        error,
                    })
                }
                Err(other) => {
                    return Err(CommonsPushError::Send {
                        commons: target.commons.url(),
                        error: other,
                    })
                }
            }
        }
        Ok(false)
    }

    /// Whether the record `did` of the commons holds `pointer`'s bytes:
    /// read through DRS (Fence-signed) into the pool, hashed on the way
    /// against the oid. `Ok(false)` when they were read and are not the
    /// object (logged); [`FenceSendError::Unreadable`] when they could not
    /// be read, which says nothing either way.
    pub(super) async fn record_proven(
        &self,
        target: &CommonsTarget<'_>,
        did: &str,
        pointer: Pointer,
    ) -> Result<bool, FenceSendError> {
        let uri = match target.commons.drs_uri(did) {
            Ok(uri) => uri,
            Err(e) => {
                log::warn!("the Gen3 commons' record {did:?} cannot be read by DRS: {e}");
                return Ok(false);
            }
        };
        let read = self
            .remote
            .fetch_verified(
                self.pool.clone(),
                &ObjectUrl::Drs(uri.clone()),
                pointer.oid,
                pointer.size,
                &|_| {},
            )
            .await;
        match read {
            Ok(_) => Ok(true),
            Err(e) if not_the_object(&e) => {
                log::warn!("{uri} is said to be object {}, but its bytes are not: {e}; not counted as held", pointer.oid);
                Ok(false)
            }
            Err(error) => Err(FenceSendError::Unreadable {
                did: did.to_string(),
                oid: pointer.oid,
                error: Box::new(error),
            }),
        }
    }

    /// The md5 of `blob` when the commons has records of its size naming an
    /// md5 and no sha256, one of which may hold it; `None` when it has
    /// none: the md5 is then the upload's, hashed as the bytes go, not a
    /// pass of its own over a file of many GB.
    async fn md5_if_asked(
        &self,
        target: &CommonsTarget<'_>,
        pointer: Pointer,
        blob: &Arc<Blob>,
    ) -> Result<Option<String>, CommonsPushError> {
        let sized = target
            .indexd
            .any_md5_only_of_size(pointer.size)
            .await
            .map_err(|error| CommonsPushError::Ask {
                commons: target.commons.url(),
                by: " by its size",
                error,
            })?;
        match sized {
            true => md5_of(blob.clone(), pointer.oid).await.map(Some),
            false => Ok(None),
        }
    }

    /// Whether a record naming `md5` and the size but no sha256 is the
    /// object: its bytes read through DRS (into the pool) hash to the oid.
    /// Then a version naming the sha256 is added. `Err` when the commons
    /// cannot be asked or refuses the version.
    async fn commons_md5_held(
        &self,
        target: &CommonsTarget<'_>,
        pointer: Pointer,
        md5: &str,
    ) -> Result<bool, CommonsPushError> {
        let records = target
            .indexd
            .by_md5_only(md5, pointer.size)
            .await
            .map_err(|error| CommonsPushError::Ask {
                commons: target.commons.url(),
                by: " by its md5",
                error,
            })?;
        let fence = target.drs.fence(target.commons.root());
        for record in records {
            let proven = self
                .record_proven(target, &record.did, pointer)
                .await
                .map_err(|error| CommonsPushError::Send {
                    commons: target.commons.url(),
                    error,
                })?;
            if !proven {
                continue;
            }
            let did = fence
                .add_sha256_version(&record, pointer.oid)
                .await
                .map_err(|error| CommonsPushError::Version {
                    oid: pointer.oid,
                    did: record.did.clone(),
                    error,
                })?;
            log::info!(
                "the Gen3 commons {} held object {} as {} under its md5 only; its bytes were shown to have the sha256, published as version {did}",
                target.commons.url(),
                pointer.oid,
                record.did
            );
            return Ok(true);
        }
        Ok(false)
    }

    /// The bytes of `pointer` on this machine: the repo's own
    /// `.git/lfs/objects` file, else the pool's (checked against its oid),
    /// else a foreign object's source read into the pool. The repo's file
    /// is read where it is, neither taken into the pool nor read out of it
    /// (most often it is the pool's very file, linked in at commit, and a
    /// link makes the pool hash it again at its next read-out, see
    /// `pool/verified.rs`): either would hash a file of many GB once more,
    /// and the upload hashes every byte it sends and completes nothing that
    /// is not the object (`multipart`, `check_whole`).
    async fn local_blob(
        &self,
        target: &CommonsTarget<'_>,
        foreign: Option<&Entry>,
        pointer: Pointer,
    ) -> Result<Blob, PushOutcome> {
        let oid = pointer.oid;
        let pool = self.pool.clone();
        let path = object_path(target.lfs_objects, &oid);
        let size = pointer.size;
        let taken = blocking(move || -> Result<Option<Blob>, PoolError> {
            match repo_file(&path)? {
                Some(blob) if blob.len() == size => Ok(Some(blob)),
                theirs => match pool.size(&oid)? {
                    Some(_) => pool.get_verified(&oid),
                    None => Ok(theirs),
                },
            }
        })
        .await;
        match taken {
            Ok(Some(blob)) if blob.len() == pointer.size => return Ok(blob),
            Ok(Some(blob)) => {
                let error = TransferError::WrongSize {
                    oid,
                    len: blob.len(),
                    size: pointer.size,
                };
                return Err(PushOutcome::Refused(PushRefusal::BadCopy {
                    error,
                    remote: target.commons.url(),
                }));
            }
            Ok(None) => {}
            Err(error) => return Err(read_failed(oid, error)),
        }
        let Some(url) = foreign.and_then(|e| ObjectUrl::parse(e.object.url.expose()).ok()) else {
            return Err(PushOutcome::Refused(PushRefusal::Nowhere {
                layout: target.commons.url(),
                remote: "origin".into(),
                oid,
            }));
        };
        if let Err(error) = self
            .remote
            .fetch_verified(self.pool.clone(), &url, oid, pointer.size, &|_| {})
            .await
        {
            return Err(unreadable(&url, error));
        }
        let pool = self.pool.clone();
        match blocking(move || pool.get_verified(&oid)).await {
            Ok(Some(blob)) => Ok(blob),
            Ok(None) => Err(PushOutcome::Failed(PushFailure::LeftThePool {
                url: url.to_string(),
            })),
            Err(error) => Err(read_failed(oid, error)),
        }
    }

    /// Sends `blob` through Fence and registers its record, resuming what
    /// the registry says a push before began (see the module notes): under
    /// the content's own did where the commons lets it be chosen
    /// (`own_did.rs`), else into a blank record of Fence's (`blank.rs`);
    /// either way the record names the bytes' location only once the store
    /// is shown to hold them (`proof.rs`). `md5`: the blob's, when known
    /// before. `Ok(false)`: the commons turned out to hold it (the content's
    /// own did registered by another machine or git-drs, or a record a push
    /// before completed): nothing was sent.
    async fn upload_through_fence(
        &self,
        target: &CommonsTarget<'_>,
        pointer: Pointer,
        blob: Arc<Blob>,
        md5: Option<String>,
        name: &str,
    ) -> Result<bool, FenceSendError> {
        let oid = pointer.oid;
        let fence = target.drs.fence(target.commons.root());
        let own_did = content_did(&target.project, &oid.to_hex());
        let mut upload = Upload {
            pointer,
            blob,
            name,
            md5,
            bytes: None,
            parts: None,
        };
        let recorded = self.journal_read(target, oid).await?;
        // A blank record of Fence's a push before began is finished first:
        // its bytes may be there already.
        if let Some(left) = recorded.filter(|r| r.did.as_deref().is_some_and(|d| d != own_did)) {
            match self.blank_resumable(target, &fence, pointer, left).await? {
                Resume::Held => return Ok(false),
                Resume::Into { guid, upload_id } => {
                    let left = multipart::Left {
                        guid: Some(&guid),
                        upload_id: upload_id.as_deref(),
                    };
                    self.send_into_blank(target, &fence, &mut upload, left)
                        .await?;
                    return Ok(true);
                }
                Resume::Fresh => {}
            }
        }
        match self
            .under_own_did(target, &fence, &mut upload, &own_did)
            .await?
        {
            Own::Sent => Ok(true),
            Own::Held => Ok(false),
            Own::Refused(why) => {
                log::warn!("object {oid}: {why}; uploading into a record of Fence's instead");
                let left = multipart::Left::default();
                self.send_into_blank(target, &fence, &mut upload, left)
                    .await?;
                Ok(true)
            }
        }
    }

    /// The md5 of `upload`'s object, known before or from a pass over its
    /// bytes that also shows they hash to the oid (a record is registered
    /// naming both before the bytes go up). An object of one part is read
    /// whole for it, and those bytes are kept for its PUT.
    async fn md5_ahead(&self, upload: &mut Upload<'_>) -> Result<String, FenceSendError> {
        if let Some(md5) = &upload.md5 {
            return Ok(md5.clone());
        }
        let pointer = upload.pointer;
        let md5 = match pointer.size <= self.upload.part_size {
            true => {
                let bytes = read_part(upload.blob.clone(), 0, pointer.size).await?;
                let md5 = check_whole(&bytes, pointer.oid, None)?;
                upload.bytes = Some(bytes::Bytes::from(bytes));
                md5
            }
            // Hashed ahead since the commit, or now (`ahead.rs`).
            false => {
                let part_size = self.upload.part_size;
                let hashes = self
                    .md5s
                    .hashes(pointer.oid, upload.blob.clone(), part_size);
                let hashes = hashes.await?;
                if hashes.part_size == part_size {
                    upload.parts = Some(hashes.parts);
                }
                hashes.md5
            }
        };
        upload.md5 = Some(md5.clone());
        Ok(md5)
    }

    /// Sends `upload`'s bytes under the record `guid`, one PUT or a
    /// multipart upload (resuming `upload_id`), or, with no guid, into a
    /// new blank record of Fence's: where they went and what the store must
    /// answer for them.
    async fn send_through_fence(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        upload: &mut Upload<'_>,
        left: multipart::Left<'_>,
    ) -> Result<Placed, FenceSendError> {
        let pointer = upload.pointer;
        let oid = pointer.oid;
        if pointer.size > self.upload.part_size {
            let source = multipart::Source {
                pointer,
                blob: upload.blob.clone(),
                md5: upload.md5.as_deref(),
                parts: upload.parts.as_deref(),
                name: upload.name,
            };
            let sent = self.multipart(target, fence, &source, left).await?;
            let md5 = sent.md5.or_else(|| upload.md5.clone());
            let md5 = md5.ok_or(FenceSendError::HashingStopped { oid })?;
            let location = sent.location.ok_or_else(|| FenceSendError::NoLocation {
                guid: sent.guid.clone(),
            })?;
            return Ok(Placed {
                guid: sent.guid,
                location,
                md5,
                etag: sent.etag,
            });
        }
        let (guid, url) = match left.guid {
            Some(guid) => (guid.to_string(), fence.upload_url(guid, upload.name).await?),
            None => {
                let new = fence.begin_upload(upload.name, target.authz).await?;
                (new.guid, new.url)
            }
        };
        self.journal(target, oid, FenceStep::Blank, Some(&guid), None)
            .await?;
        let bytes = match upload.bytes.take() {
            Some(bytes) => bytes,
            None => bytes::Bytes::from(read_part(upload.blob.clone(), 0, pointer.size).await?),
        };
        // Read again or kept from the md5's pass: shown to be the object
        // either way before they go.
        let md5 = check_whole(&bytes, oid, upload.md5.as_deref())?;
        let key = format!("{guid}/{}", upload.name);
        let location = location_of(&url, &key)
            .ok_or_else(|| FenceSendError::NoLocation { guid: guid.clone() })?;
        let answered = fence.put(&format!("object {oid}"), &url, bytes).await?;
        if answered.is_some_and(|etag| etag.to_ascii_lowercase() != md5) {
            return Err(FenceSendError::PartNotStored { number: 1, oid });
        }
        Ok(Placed {
            guid,
            location,
            etag: md5.clone(),
            md5,
        })
    }

    async fn journal(
        &self,
        target: &CommonsTarget<'_>,
        oid: Oid,
        step: FenceStep,
        did: Option<&str>,
        upload_id: Option<&str>,
    ) -> Result<(), FenceSendError> {
        let (registry, key) = (self.registry.clone(), target.key.clone());
        let (did, upload_id) = (did.map(str::to_string), upload_id.map(str::to_string));
        blocking(move || {
            registry.fence_journal().fence_step(
                &key,
                oid,
                step,
                did.as_deref(),
                upload_id.as_deref(),
            )
        })
        .await?;
        Ok(())
    }

    async fn journal_read(
        &self,
        target: &CommonsTarget<'_>,
        oid: Oid,
    ) -> Result<Option<FenceUpload>, RegistryError> {
        let (registry, key) = (self.registry.clone(), target.key.clone());
        blocking(move || registry.fence_journal().fence_upload(&key, oid)).await
    }

    async fn journal_forget(
        &self,
        target: &CommonsTarget<'_>,
        oid: Oid,
    ) -> Result<(), RegistryError> {
        let (registry, key) = (self.registry.clone(), target.key.clone());
        blocking(move || registry.fence_journal().fence_forget(&key, oid)).await
    }
}

/// What a push before left of an upload into a blank record of Fence's
/// ([`Transfers::blank_resumable`]).
enum Resume {
    Fresh,
    /// A blank record to finish, and the multipart upload begun into it.
    Into {
        guid: String,
        upload_id: Option<String>,
    },
    Held,
}

/// How an upload under the content's did ended ([`Transfers::under_own_did`]).
enum Own {
    Sent,
    Held,
    /// The commons would not have it there (why, for the log): the bytes
    /// go into a blank record of Fence's instead.
    Refused(String),
}

/// One object on its way up, and what is known of it so far.
struct Upload<'a> {
    pointer: Pointer,
    blob: Arc<Blob>,
    /// The name Fence files it under.
    name: &'a str,
    /// Its md5, once known.
    md5: Option<String>,
    /// Its bytes, when a pass for the md5 read them whole (one part).
    bytes: Option<bytes::Bytes>,
    /// The md5s of its parts, when that pass gave them (`upload_part_size`
    /// parts): the upload then hashes only the sha256.
    parts: Option<Vec<[u8; 16]>>,
}

/// Bytes an upload put in the commons' bucket, and what their record needs.
struct Placed {
    /// The record they went under: a blank record's, or the content's did.
    guid: String,
    /// `s3://bucket/key`.
    location: String,
    md5: String,
    /// The ETag the store must answer for them: their md5 for one PUT,
    /// `md5-of-md5s-N` for a multipart upload.
    etag: String,
}

/// Whether a record claims `pointer`'s content: its sha256 and size (with
/// or without a location).
fn claims(record: &CommonsRecord, pointer: Pointer) -> bool {
    record.hash("sha256") == Some(pointer.oid.to_hex()) && record.size == Some(pointer.size)
}

/// The name Fence files the object under: the base name of its first
/// path (Gen3 `file_name` is a base name), else its oid.
fn file_name(pushed: &Pushed) -> String {
    pushed
        .paths
        .first()
        .and_then(|p| p.rsplit('/').next())
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| pushed.pointer.oid.to_hex())
}

/// The repo's object file at `path` as a blob, opened without following
/// a link (a hostile repo may plant one there); `None` when there is no
/// regular file.
fn repo_file(path: &Path) -> Result<Option<Blob>, PoolError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = match std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(None),
        Err(source) => return Err(crate::IoError::new("open", path, source).into()),
    };
    let meta = file
        .metadata()
        .map_err(|source| crate::IoError::new("stat", path, source))?;
    Ok(meta.is_file().then(|| Blob::File {
        len: meta.len(),
        file,
        path: path.to_path_buf(),
    }))
}

/// `len` bytes of `blob` at `offset`, read off the async threads.
async fn read_part(blob: Arc<Blob>, offset: u64, len: u64) -> Result<Vec<u8>, PoolError> {
    blocking(move || blob.read_at(offset, len)).await
}

/// The md5 of `blob`, read once off the async threads.
async fn md5_of(blob: Arc<Blob>, oid: Oid) -> Result<String, CommonsPushError> {
    blocking(move || {
        let mut hasher = Md5::new();
        let step = 8 << 20;
        let mut offset = 0;
        while offset < blob.len() {
            let chunk = blob
                .read_at(offset, step)
                .map_err(|error| CommonsPushError::Read { oid, error })?;
            hasher.update(&chunk);
            offset += chunk.len().max(1) as u64;
        }
        Ok(hex::encode(hasher.finalize()))
    })
    .await
}

/// `bytes` are object `oid` (with md5 `md5` when given), or the upload is
/// refused; their md5.
fn check_whole(bytes: &[u8], oid: Oid, md5: Option<&str>) -> Result<String, FenceSendError> {
    let got = Oid::of(bytes);
    let got_md5 = hex::encode(Md5::digest(bytes));
    if got != oid || md5.is_some_and(|md5| md5 != got_md5) {
        return Err(FenceSendError::NotTheObject { oid, got });
    }
    Ok(got_md5)
}

/// Whether `error` says the bytes read are not the object (rather than
/// that they could not be read).
fn not_the_object(error: &ResolveError) -> bool {
    matches!(
        error,
        ResolveError::Disagrees { .. } | ResolveError::Fetch(FetchError::Mismatch { .. })
    )
}

/// What a pass over an object's bytes gives a record registered before
/// they go up, and the upload after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Hashes {
    /// The md5 of the whole.
    md5: String,
    /// The parts' size, and the md5 of each part of it: the ETags the
    /// store must answer for a multipart upload of those parts.
    part_size: u64,
    parts: Vec<[u8; 16]>,
}

/// The md5 of `blob` and of each of its parts of `part_size`, in one pass
/// that also shows it hashes to `oid`: the whole md5 on one thread, the
/// sha256 and the parts' md5s on another.
async fn checked_hashes(
    blob: Arc<Blob>,
    oid: Oid,
    part_size: u64,
) -> Result<Hashes, FenceSendError> {
    log::info!("object {oid}: an md5 pass over its {} bytes", blob.len());
    let part_size = part_size.max(1);
    let (md5_of, sha_of) = (blob.clone(), blob);
    let md5 = tokio::task::spawn_blocking(move || pass(&md5_of, Md5::new()));
    let sha = tokio::task::spawn_blocking(move || sha_and_parts(&sha_of, part_size));
    let (md5, sha) = (md5.await, sha.await);
    let (Ok(md5), Ok(sha)) = (md5, sha) else {
        return Err(FenceSendError::HashingStopped { oid });
    };
    let (got, parts) = sha?;
    if got != oid {
        return Err(FenceSendError::NotTheObject { oid, got });
    }
    Ok(Hashes {
        md5: hex::encode(md5?),
        part_size,
        parts,
    })
}

/// Read steps of at most 8 MiB, none across a part's end.
fn steps(len: u64, part_size: u64) -> impl Iterator<Item = (u64, u64)> {
    let step = 8 << 20;
    let mut offset = 0;
    std::iter::from_fn(move || {
        if offset >= len {
            return None;
        }
        let part_end = (offset / part_size + 1) * part_size;
        let n = step.min(part_end - offset).min(len - offset);
        let at = offset;
        offset += n;
        Some((at, n))
    })
}

/// `hasher` over every byte of `blob`.
fn pass<D: Digest>(blob: &Blob, mut hasher: D) -> Result<md5::digest::Output<D>, PoolError> {
    for (offset, n) in steps(blob.len(), u64::MAX) {
        hasher.update(&blob.read_at(offset, n)?);
    }
    Ok(hasher.finalize())
}

/// The sha256 of `blob` and the md5 of each of its parts of `part_size`.
fn sha_and_parts(blob: &Blob, part_size: u64) -> Result<(Oid, Vec<[u8; 16]>), PoolError> {
    let mut sha = sha2::Sha256::new();
    let mut parts = Vec::new();
    let mut part = Md5::new();
    for (offset, n) in steps(blob.len(), part_size) {
        let chunk = blob.read_at(offset, n)?;
        sha2::Digest::update(&mut sha, &chunk);
        part.update(&chunk);
        if (offset + n) % part_size == 0 || offset + n == blob.len() {
            parts.push(std::mem::replace(&mut part, Md5::new()).finalize().into());
        }
    }
    Ok((Oid::from_digest(sha2::Digest::finalize(sha).into()), parts))
}

/// A pool read failed: the push of this object fails, naming it.
fn read_failed(oid: Oid, error: PoolError) -> PushOutcome {
    PushOutcome::Failed(CommonsPushError::Read { oid, error }.into())
}

/// A foreign object not here whose source could not be read.
fn unreadable(url: &ObjectUrl, error: ResolveError) -> PushOutcome {
    PushOutcome::Refused(PushRefusal::Unreadable {
        url: url.to_string(),
        error,
    })
}

/// The `s3://bucket/key` a signed PUT URL writes, `key` being what Fence
/// signs (`{guid}/{file_name}`): the path segment before the key is the
/// bucket (path-style, as Ceph RGW and most S3 stores sign, under any
/// prefix the store is mounted at), else the host's first label
/// (virtual-hosted). What the completed record names as the object's
/// location; never the URL itself, which carries its signature.
fn location_of(url: &SecretUrl, key: &str) -> Option<String> {
    let parsed = url::Url::parse(url.expose()).ok()?;
    let path: Vec<String> = parsed
        .path_segments()?
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let key_len = key.split('/').count();
    if path.len() < key_len || path[path.len() - key_len..].join("/") != key {
        return None;
    }
    let bucket = match path.len() - key_len {
        0 => parsed.host_str()?.split('.').next()?.to_string(),
        n => path[n - 1].clone(),
    };
    (!bucket.is_empty()).then(|| format!("s3://{bucket}/{key}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_gives_the_md5_of_the_whole_and_of_each_part_and_checks_the_sha256() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("object");
        let bytes: Vec<u8> = (0..(20u32 << 20) + 12_345)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&path, &bytes).unwrap();
        let blob = || Arc::new(repo_file(&path).unwrap().unwrap());
        let oid = Oid::of(&bytes);
        let rt = tokio::runtime::Runtime::new().unwrap();
        let part_size = 5 << 20;
        let hashes = rt.block_on(checked_hashes(blob(), oid, part_size)).unwrap();
        assert_eq!(hashes.md5, hex::encode(Md5::digest(&bytes)));
        let parts: Vec<[u8; 16]> = bytes
            .chunks(part_size as usize)
            .map(|c| Md5::digest(c).into())
            .collect();
        assert_eq!(hashes.parts.len(), 5);
        assert_eq!(hashes.parts, parts);
        let other = Oid::of(b"other");
        assert!(matches!(
            rt.block_on(checked_hashes(blob(), other, part_size)),
            Err(FenceSendError::NotTheObject { .. })
        ));
    }

    #[test]
    fn the_location_of_a_signed_url_is_its_bucket_and_key_without_the_signature() {
        let path = SecretUrl::new(
            "http://127.0.0.1:8000/s3/bkt/dg.T/g-1/a%20b.bam?X-Amz-Signature=s3cr3t",
        );
        assert_eq!(
            location_of(&path, "dg.T/g-1/a b.bam").as_deref(),
            Some("s3://bkt/dg.T/g-1/a b.bam")
        );
        let hosted =
            SecretUrl::new("https://bkt.s3.us-east-1.amazonaws.com/g-1/x.bam?X-Amz-Signature=s");
        assert_eq!(
            location_of(&hosted, "g-1/x.bam").as_deref(),
            Some("s3://bkt/g-1/x.bam")
        );
        assert_eq!(location_of(&hosted, "g-2/x.bam"), None);
    }
}
