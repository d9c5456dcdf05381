//! Pushing to a Gen3 commons as the repo's object remote
//! (`drs-remote=gen3+https://host`, `remote/gen3.rs`). For each object
//! the push introduces:
//!
//! - a record of the commons' Indexd shown to hold it (`held.rs`, the one
//!   decision this push and the `--indexd` push of `indexd.rs` share):
//!   nothing is sent. Here a record naming its sha256 and a location
//!   counts when the user trusts the commons' claims, when this node
//!   completed and proved that very record, or once its bytes, read
//!   through DRS, hash to the oid; a record of its md5 only, once so read,
//!   gets a version naming the sha256. One whose bytes cannot be read
//!   fails the push with the reason, rather than sending them again;
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
//! (`registry/gen3/fence.rs`, the node's own): a push killed anywhere leaves at most a
//! record without a location (the content's claim, or Fence's blank one)
//! and the upload begun, which the next push finds and finishes.
//! Signed URLs and the token never reach a log line or an error: errors
//! name the record.

mod ahead;
mod blank;
mod held;
mod indexd;
mod own_did;
mod proof;
mod resume;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use super::push::{PushFailure, PushOutcome, PushRefusal};
use super::{TransferError, Transfers, PARALLEL};
pub use ahead::Md5Ahead;
use held::{By, HeldError};
pub use indexd::{IndexdPushError, IndexdTarget, Registered};

use crate::blocking;
use crate::lfs::hydrate::object_path;
use crate::lfs::{Pointer, Pushed};
use crate::pool::{Blob, Oid, PoolError};
use crate::registry::{Entry, FenceStep, FenceUpload, RegistryError};
use crate::remote::digest::{self, md5_of, read_part, DigestError};
use crate::remote::fence_upload::{self, FenceUploadError, Source};
use crate::remote::{project_of, FetchError, Gen3Commons, ObjectRemote, ResolveError};
use crate::stores::drs::{
    content_did, CommonsRecord, DrsClient, DrsError, Fence, IndexdClient, IndexdRecord,
};
use crate::stores::ObjectUrl;
use drsd_proto::PushReport;

/// Why an object could not be pushed to a Gen3 commons now; pushing again
/// may succeed. Each names the commons or the record, never a signed URL.
#[derive(Debug, thiserror::Error)]
pub enum CommonsPushError {
    /// Whether the commons holds the object could not be said.
    #[error("the Gen3 commons {commons}: {error}; nothing was sent, push again")]
    Held {
        commons: String,
        #[source]
        error: HeldError,
    },
    /// The object's bytes here could not be read.
    #[error("reading object {oid} here: {error}")]
    Read {
        oid: Oid,
        #[source]
        error: PoolError,
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
    #[error(transparent)]
    Upload(#[from] FenceUploadError),
    #[error(transparent)]
    Digest(#[from] DigestError),
    #[error("recording the upload's step first: {0}; nothing more was done")]
    Journal(#[from] RegistryError),
    #[error("reading the object for its upload: {0}")]
    Read(#[from] PoolError),
    #[error("the record {guid} is gone after its upload")]
    RecordGone { guid: String },
    #[error("the record {guid} was completed by someone else with other content")]
    OtherContent { guid: String },
    #[error("the record {did} (this content's did) was registered by someone else meanwhile, and its bytes could not be shown to be the object")]
    TakenMeanwhile { did: String },
    #[error("the record {guid} has no rev to complete it by")]
    NoRev { guid: String },
    #[error("the record {guid} was read back after the upload, and {why}: its location was taken out again")]
    NotPlaced { guid: String, why: String },
    #[error("the record {guid} changed under every try to set its location")]
    Contended { guid: String },
    #[error(transparent)]
    Held(#[from] HeldError),
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
        let held_failed = |error| {
            let commons = target.commons.url();
            Pushed3::Not(Box::new(PushOutcome::Failed(
                CommonsPushError::Held { commons, error }.into(),
            )))
        };
        let mut proof = CommonsProof::new(self, target, pointer);
        match held::by_sha256(&target.indexd, pointer, &mut proof).await {
            Err(error) => return held_failed(error),
            Ok(Some(_)) => return Pushed3::Held,
            Ok(None) => {}
        }
        let blob = match self.local_blob(target, foreign, pointer).await {
            Ok(blob) => Arc::new(blob),
            Err(outcome) => return Pushed3::Not(Box::new(outcome)),
        };
        // The md5, when the md5-only records asked for it, is the upload's
        // too: one pass over the bytes.
        let mut known = None;
        let md5 = async {
            let md5 = md5_of(blob.clone())
                .await
                .map_err(|error| HeldError::Read {
                    oid: pointer.oid,
                    error,
                })?;
            known = Some(md5.clone());
            Ok(Some(md5))
        };
        let name = target.commons.url();
        match held::by_md5(&target.indexd, &name, pointer, md5, &mut proof).await {
            Err(error) => return held_failed(error),
            Ok(Some(_)) => return Pushed3::Held,
            Ok(None) => {}
        }
        match self
            .upload_through_fence(target, pointer, blob, known, &file_name(pushed))
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

    /// Whether the record `did` of the commons holds `pointer`'s bytes:
    /// read through DRS (Fence-signed) into the pool, hashed on the way
    /// against the oid. `Ok(false)` when they were read and are not the
    /// object (logged); [`HeldError::Unreadable`] when they could not be
    /// read, which says nothing either way.
    pub(super) async fn record_proven(
        &self,
        target: &CommonsTarget<'_>,
        did: &str,
        pointer: Pointer,
    ) -> Result<bool, HeldError> {
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
            Err(error) => Err(HeldError::Unreadable {
                did: did.to_string(),
                oid: pointer.oid,
                error: Box::new(error),
            }),
        }
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
                    let left = resume::Left {
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
                let left = resume::Left::default();
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
                let md5 = digest::check_whole(&bytes, pointer.oid, None)?;
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
        left: resume::Left<'_>,
    ) -> Result<Placed, FenceSendError> {
        let pointer = upload.pointer;
        let oid = pointer.oid;
        if pointer.size > self.upload.part_size {
            let source = Source {
                pointer,
                blob: upload.blob.clone(),
                md5: upload.md5.as_deref(),
                parts: upload.parts.as_deref(),
                name: upload.name,
            };
            let sent = self.multipart(target, fence, &source, left).await?;
            let md5 = sent.md5.or_else(|| upload.md5.clone());
            let md5 = md5.ok_or(DigestError::Stopped { oid })?;
            let location = sent.location.ok_or_else(|| FenceUploadError::NoLocation {
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
        let key = format!("{guid}/{}", upload.name);
        let whole = (oid, upload.md5.as_deref());
        let put = fence_upload::put_whole(fence, whole, (&guid, &key), &url, bytes).await?;
        Ok(Placed {
            guid,
            location: put.location,
            etag: put.md5.clone(),
            md5: put.md5,
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

/// A commons' records shown to hold an object as `mod.rs` says: a record
/// naming its sha256 counts when the user trusts the commons at its word
/// (`trust_claims` names `gen3+https://host`), or this node completed and
/// proved that very record (its Fence journal, always the node's own, says
/// `done` under its did); any record, once its bytes, read through DRS,
/// hash to the oid.
struct CommonsProof<'t, 'a> {
    transfers: &'t Transfers,
    target: &'t CommonsTarget<'a>,
    pointer: Pointer,
    /// The did the journal says this node completed, once read.
    done: Option<Option<String>>,
}

impl<'t, 'a> CommonsProof<'t, 'a> {
    fn new(
        transfers: &'t Transfers,
        target: &'t CommonsTarget<'a>,
        pointer: Pointer,
    ) -> CommonsProof<'t, 'a> {
        CommonsProof {
            transfers,
            target,
            pointer,
            done: None,
        }
    }

    /// The did of the record this node's journal says it completed.
    async fn done(&mut self) -> Option<&str> {
        if self.done.is_none() {
            let read = self
                .transfers
                .journal_read(self.target, self.pointer.oid)
                .await;
            self.done = Some(match read {
                Ok(Some(sent)) if sent.step == FenceStep::Done => sent.did,
                Ok(_) => None,
                // Then the record is read instead: slower, as sure.
                Err(e) => {
                    log::warn!("object {}: {e}", self.pointer.oid);
                    None
                }
            });
        }
        self.done.as_ref().and_then(|did| did.as_deref())
    }
}

impl held::Proof for CommonsProof<'_, '_> {
    async fn holds(&mut self, record: &IndexdRecord, by: By) -> Result<bool, HeldError> {
        if by == By::Sha256 {
            if self.transfers.remote.trusts(&self.target.key) {
                return Ok(true);
            }
            if self.done().await == Some(record.did.as_str()) {
                return Ok(true);
            }
        }
        let (target, did) = (self.target, &record.did);
        self.transfers
            .record_proven(target, did, self.pointer)
            .await
    }

    async fn add_sha256_version(&self, record: &IndexdRecord) -> Result<String, DrsError> {
        let fence = self.target.drs.fence(self.target.commons.root());
        fence.add_sha256_version(record, self.pointer.oid).await
    }
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

/// Whether `error` says the bytes read are not the object (rather than
/// that they could not be read).
fn not_the_object(error: &ResolveError) -> bool {
    matches!(
        error,
        ResolveError::Disagrees { .. } | ResolveError::Fetch(FetchError::Mismatch { .. })
    )
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
