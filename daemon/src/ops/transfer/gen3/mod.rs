//! Pushing to a Gen3 commons as the repo's object remote
//! (`drs-remote=gen3+https://host`, `remote/commons.rs`). For each object
//! the push introduces:
//!
//! - a record of the commons' Indexd with its sha256 and size is the object
//!   held: nothing is sent (the commons is the object remote the user chose
//!   and named in `DRSD_DRS_SERVERS`; a clone checks every download against
//!   the oid all the same);
//! - else a record of its md5 and size naming no sha256 (most Gen3 records)
//!   is the object once its bytes, read through DRS (Fence-signed), hash to
//!   the oid: then a version of it carrying the sha256 is added (`POST
//!   /index/{did}`, same `baseid`), and nothing is sent;
//! - else the record of the content's own did (UUIDv5 over
//!   `"<project>:<sha256>"`, as calypr/git-drs derives it), if it exists with
//!   this sha256, is the object held (another machine, or git-drs, pushed it);
//! - otherwise the bytes go up through Fence's signed URLs, a multipart
//!   upload (of one part for a small object) begun under that very did,
//!   which Fence takes as given; once they are in place the complete
//!   record is registered under it (`POST /index/`, size, sha256, md5,
//!   location), so a fresh clone asking by sha256 finds it, and two
//!   machines pushing the same content at once make one record (the
//!   second's registration is 409, and it counts the first's record once
//!   its bytes are shown to be the object). Where that did is taken by
//!   other content, or Fence makes a blank record of its own whatever guid
//!   it is given (as Fence did before it took one), the bytes go into
//!   Fence's blank record (one PUT, or a multipart upload above the
//!   `upload_part_size` setting), which is then completed (`PUT
//!   /index/blank/{guid}?rev=R`).
//!
//! Each step is recorded in the registry before it is taken
//! (`registry/fence_uploads.rs`): a push killed anywhere leaves no record
//! (under the content's did) or at most a blank one (Fence's), and the
//! upload begun, which the next push finds by the registry and finishes.
//! Signed URLs and the token never reach a log line or an error: errors
//! name the record.

mod multipart;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};
use md5::{Digest, Md5};

use super::push::{PushFailure, PushOutcome, PushRefusal};
use super::{TransferError, Transfers, PARALLEL};
use crate::blocking;
use crate::lfs::hydrate::object_path;
use crate::lfs::{Pointer, Pushed};
use crate::pool::{Blob, Oid, PoolError};
use crate::registry::{Entry, FenceStep, FenceUpload, RegistryError};
use crate::remote::{project_of, Gen3Commons, ObjectRemote, ResolveError};
use crate::stores::drs::{
    content_did, CommonsRecord, Completion, DrsClient, DrsError, Fence, IndexdClient, Registration,
};
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
            .upload_through_fence(target, pointer, blob, md5.as_deref(), &name)
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
    /// its sha256 and size; `Err` when it cannot be asked. A record is a
    /// claim (whoever may write the project's records chose its hashes and
    /// its location, DESIGN.md "Trust"): it counts when the user trusts
    /// the commons at its word (`trust_claims` names `gen3+https://host`),
    /// when this daemon completed that very record after sending the bytes
    /// (the registry's Fence journal says `done` under its did), or once
    /// its bytes, read through DRS, hash to the oid.
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
            .filter(|r| r.size == Some(pointer.size))
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
            if self.record_proven(target, did, pointer).await {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether the record `did` of the commons holds `pointer`'s bytes:
    /// read through DRS (Fence-signed) into the pool, hashed on the way
    /// against the oid. A record that fails is logged and not counted.
    async fn record_proven(&self, target: &CommonsTarget<'_>, did: &str, pointer: Pointer) -> bool {
        let uri = match target.commons.drs_uri(did) {
            Ok(uri) => uri,
            Err(e) => {
                log::warn!("the Gen3 commons' record {did:?} cannot be read by DRS: {e}");
                return false;
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
            Ok(_) => true,
            Err(e) => {
                log::warn!("{uri} is said to be object {}, but reading it did not show the object: {e}; not counted as held", pointer.oid);
                false
            }
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
            if !self.record_proven(target, &record.did, pointer).await {
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

    /// Sends `blob` through Fence and registers or completes its record,
    /// resuming what the registry says a push before began. A fresh upload
    /// goes under the content's own did (`own_did`) when no record holds
    /// that did: Fence takes the guid a multipart upload is begun under as
    /// given, and the complete record is registered under it once the
    /// bytes are in place, so two machines (or drsd and git-drs) pushing
    /// the same content at once make one record, and a kill leaves no
    /// record at all. A Fence that makes a blank record of its own instead
    /// (one before it took a guid), or a did taken by other content, gives
    /// the upload a blank record that is then completed. `md5`: the blob's,
    /// when known before; else the upload's hashing gives it. `Ok(false)`:
    /// the commons turned out to hold it (the content's own did registered
    /// by another machine or git-drs, or a record a push before completed):
    /// nothing was sent.
    async fn upload_through_fence(
        &self,
        target: &CommonsTarget<'_>,
        pointer: Pointer,
        blob: Arc<Blob>,
        md5: Option<&str>,
        name: &str,
    ) -> Result<bool, FenceSendError> {
        let oid = pointer.oid;
        let fence = target.drs.fence(target.commons.root());
        let own_did = content_did(&target.project, &oid.to_hex());
        let own_free = match fence.record(&own_did).await? {
            Some(record)
                if !record.is_blank()
                    && holds(&record, pointer)
                    && self.record_proven(target, &record.did, pointer).await =>
            {
                self.journal(target, oid, FenceStep::Done, Some(&record.did), None)
                    .await?;
                return Ok(false);
            }
            Some(record) => {
                log::warn!(
                    "the record {} (the did of object {oid} in project {}) names other content (sha256 {}), or its bytes are not the object; uploading into a record of Fence's",
                    record.did,
                    target.project,
                    record.hash("sha256").unwrap_or_else(|| "none".into())
                );
                false
            }
            None => true,
        };
        let (guid, open_upload) = match self.resumable(target, &fence, pointer, &own_did).await? {
            Resume::Held => return Ok(false),
            Resume::Into { guid, upload_id } => (Some(guid), upload_id),
            Resume::Fresh => (own_free.then(|| own_did.clone()), None),
        };
        // Recorded before anything is asked of Fence: a kill after Fence
        // made a blank record and before its guid is recorded leaves one
        // blank record nobody finishes, never a complete one without its
        // bytes. The upload a push before began stays recorded, with its
        // parts.
        self.journal(
            target,
            oid,
            FenceStep::Begun,
            guid.as_deref(),
            open_upload.as_deref(),
        )
        .await?;
        // One PUT only into a blank record of Fence's: under the content's
        // did there is no record to sign a PUT for, and a multipart upload
        // of one part is begun instead.
        let single = pointer.size <= self.upload.part_size && guid.as_ref() != Some(&own_did);
        let (guid, key, md5) = match single {
            true => {
                let (guid, url) = match &guid {
                    Some(guid) => {
                        let url = fence.upload_url(guid, name).await?;
                        (guid.clone(), url)
                    }
                    None => {
                        let new = fence.begin_upload(name, target.authz).await?;
                        (new.guid, new.url)
                    }
                };
                self.journal(target, oid, FenceStep::Blank, Some(&guid), None)
                    .await?;
                let bytes = read_part(blob.clone(), 0, pointer.size).await?;
                let md5 = check_whole(&bytes, oid, md5)?;
                let key = format!("{guid}/{name}");
                let location = location_of(&url, &key);
                fence
                    .put(&format!("object {oid}"), &url, bytes::Bytes::from(bytes))
                    .await?;
                (guid, location, md5)
            }
            false => {
                let source = multipart::Source {
                    pointer,
                    blob: blob.clone(),
                    md5,
                    name,
                };
                let left = multipart::Left {
                    guid: guid.as_deref(),
                    upload_id: open_upload.as_deref(),
                };
                let sent = self.multipart(target, &fence, &source, left).await?;
                (sent.guid, sent.location, sent.md5)
            }
        };
        self.journal(target, oid, FenceStep::Uploaded, Some(&guid), None)
            .await?;
        let location = key.ok_or_else(|| FenceSendError::NoLocation { guid: guid.clone() })?;
        let placed = Placed {
            guid: &guid,
            name,
            md5: &md5,
            location,
            own_did: &own_did,
        };
        self.finish_record(target, &fence, pointer, placed).await?;
        self.journal(target, oid, FenceStep::Done, Some(&guid), None)
            .await?;
        log::info!(
            "object {oid}: sent to the Gen3 commons {} as record {guid}",
            target.commons.url()
        );
        Ok(true)
    }

    /// What the registry says a push before left of `pointer`'s upload: a
    /// blank record, or an upload under the content's did (`own_did`), to
    /// finish; a record it completed; or nothing (a record gone or filled
    /// with other content is forgotten).
    async fn resumable(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        pointer: Pointer,
        own_did: &str,
    ) -> Result<Resume, FenceSendError> {
        let oid = pointer.oid;
        let recorded = self.journal_read(target, oid).await?;
        // Bytes this daemon sent are in a blank record of Fence's from
        // `uploaded` on; one completed by another before that is shown like
        // any other, and so is the content's did, which anyone may have
        // registered, naming any location, while this push's own
        // registration failed.
        let sent_here = recorded
            .as_ref()
            .is_some_and(|r| r.step >= FenceStep::Uploaded && r.did.as_deref() != Some(own_did));
        let upload_id = recorded
            .as_ref()
            .filter(|r| r.step <= FenceStep::Uploading)
            .and_then(|r| r.upload_id.clone());
        let Some(did) = recorded.and_then(|r| r.did) else {
            return Ok(Resume::Fresh);
        };
        match fence.record(&did).await? {
            // An upload under the content's did, not registered yet.
            None if did == own_did => {
                log::info!(
                    "object {oid}: finishing the upload under its did {did} a push before began"
                );
                Ok(Resume::Into {
                    guid: did,
                    upload_id,
                })
            }
            Some(record) if record.is_blank() => {
                log::info!("object {oid}: finishing the blank record {did} a push before began");
                Ok(Resume::Into {
                    guid: record.did,
                    upload_id,
                })
            }
            Some(record)
                if holds(&record, pointer)
                    && (sent_here || self.record_proven(target, &record.did, pointer).await) =>
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

    /// The record of the bytes `placed` says are in the commons' bucket:
    /// registered under the content's did when the upload went under it
    /// (one registered by someone else at once,
    /// with this content, is counted once its bytes are shown to be the
    /// object), else the blank record `guid` completed with size, hashes,
    /// location and authz; a record already complete with this content is
    /// left as it is.
    async fn finish_record(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        pointer: Pointer,
        placed: Placed<'_>,
    ) -> Result<(), FenceSendError> {
        let guid = placed.guid.to_string();
        let completion = Completion {
            size: pointer.size,
            sha256: pointer.oid.to_hex(),
            md5: placed.md5.to_string(),
            urls: vec![placed.location],
            authz: target.authz.to_vec(),
        };
        // Under the content's did no record was made for the upload: it is
        // registered now (Indexd says if the did was taken meanwhile).
        if guid == placed.own_did {
            return self
                .register_own(target, fence, pointer, &guid, placed.name, &completion)
                .await;
        }
        let Some(record) = fence.record(&guid).await? else {
            return Err(FenceSendError::RecordGone { guid });
        };
        if !record.is_blank() {
            if record.hash("sha256") == Some(pointer.oid.to_hex()) {
                return Ok(());
            }
            return Err(FenceSendError::OtherContent { guid });
        }
        let Some(rev) = record.rev else {
            return Err(FenceSendError::NoRev { guid });
        };
        Ok(fence.complete(&record.did, &rev, &completion).await?)
    }

    /// Registers the record `did`, the content's own, whose bytes the
    /// upload just put in place. Taken meanwhile (another machine, or
    /// git-drs, pushing the same content at once): that record counts
    /// when it names this content and its bytes are shown to be the
    /// object, as any record's claim (DESIGN.md "Trust").
    async fn register_own(
        &self,
        target: &CommonsTarget<'_>,
        fence: &Fence<'_>,
        pointer: Pointer,
        did: &str,
        name: &str,
        completion: &Completion,
    ) -> Result<(), FenceSendError> {
        if fence.register(did, name, completion).await? == Registration::Made {
            return Ok(());
        }
        let theirs = fence.record(did).await?;
        if theirs.is_some_and(|r| !r.is_blank() && holds(&r, pointer))
            && self.record_proven(target, did, pointer).await
        {
            log::info!(
                "object {}: its did {did} was registered by another push at once, with its bytes",
                pointer.oid
            );
            return Ok(());
        }
        Err(FenceSendError::TakenMeanwhile {
            did: did.to_string(),
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
            registry.fence_step(&key, oid, step, did.as_deref(), upload_id.as_deref())
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
        blocking(move || registry.fence_upload(&key, oid)).await
    }

    async fn journal_forget(
        &self,
        target: &CommonsTarget<'_>,
        oid: Oid,
    ) -> Result<(), RegistryError> {
        let (registry, key) = (self.registry.clone(), target.key.clone());
        blocking(move || registry.fence_forget(&key, oid)).await
    }
}

/// What a push before left of an upload ([`Transfers::resumable`]).
enum Resume {
    Fresh,
    /// A blank record, or the content's did not yet registered, to finish,
    /// and the multipart upload begun under it.
    Into {
        guid: String,
        upload_id: Option<String>,
    },
    Held,
}

/// Bytes an upload put in the commons' bucket, and what their record needs.
struct Placed<'a> {
    /// The guid they went under: a blank record's, or the content's did.
    guid: &'a str,
    name: &'a str,
    md5: &'a str,
    /// `s3://bucket/key`.
    location: String,
    own_did: &'a str,
}

/// Whether a complete record names `pointer`'s content: its sha256 and
/// size.
fn holds(record: &CommonsRecord, pointer: Pointer) -> bool {
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
