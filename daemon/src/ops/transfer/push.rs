//! The pre-push work: before git-lfs runs, every object the push introduces
//! goes to the repo's object remote, many at a time; git-lfs then hands the
//! agent one object after another, and each is answered from what this did
//! (`confirmed.rs`). An object not shown to be in the object remote is
//! refused or failed, with what to do: a clone must be able to get every
//! object it is given.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use futures_util::stream::{self, StreamExt};

use super::gen3::{IndexdPushError, IndexdTarget, Registered};
use super::{RepoFacts, TransferError, Transfers, PARALLEL, SMALL_BATCH};
use crate::blocking;
use crate::lfs::hydrate::object_path;
use crate::lfs::{pushed_pointers, Pointer, Pushed};
use crate::pool::Oid;
use crate::registry::Entry;
use crate::remote::{
    CopyOutcome, Held, ObjectRemote, PreparedBatch, ResolveError, StoreError, UploadError,
};
use crate::stores::drs::DrsUri;
use crate::stores::{CopySource, ObjectUrl};
use drsd_proto::{PushReport, RefusedPath};

/// What became of one pushed object. Only the first four let the push go
/// on: an object not shown to be in the object remote must not be
/// published, whatever the reason.
pub enum PushOutcome {
    Present,
    /// Present on the word of the object remote (`trust_claims`).
    Trusted(String),
    Uploaded,
    Copied,
    /// Could not be sent or checked now (the store unreachable, a disk
    /// full): the push fails with the reason; pushing again may succeed.
    Failed(PushFailure),
    /// Must not be pushed as it is: the reason says what to do.
    Refused(PushRefusal),
}

/// Why a pushed object could not be sent or checked now; pushing again
/// may succeed.
#[derive(Debug, thiserror::Error)]
pub enum PushFailure {
    /// The server-side copy of a foreign object's source failed (the
    /// store's reason, as the copy words it).
    #[error("{0}")]
    Copy(String),
    /// Read from its source into the pool, then gone from it.
    #[error("{url}: left the pool right after its download")]
    LeftThePool { url: String },
    /// Refused for `why`, unless the object remote holds it, which could
    /// not be asked.
    #[error("{why}; and the object remote could not be checked for it: {error}")]
    Unchecked {
        why: PushRefusal,
        #[source]
        error: StoreError,
    },
    /// Sending bytes read here, in a batch of small objects.
    #[error("could not be sent to the object remote: {0}")]
    SendBytes(#[source] UploadError),
    /// Sending the repo's or the pool's copy.
    #[error("could not be sent to the object remote: {0}")]
    Send(#[source] TransferError),
    /// Indexd could not be asked, or registering with it failed.
    #[error(transparent)]
    Indexd(#[from] IndexdPushError),
    /// Asking, or sending to, the repo's Gen3 commons.
    #[error(transparent)]
    Commons(#[from] super::gen3::CommonsPushError),
}

/// Why a pushed object must not be published as it is, with what to do.
#[derive(Debug, thiserror::Error)]
pub enum PushRefusal {
    /// The pointer still names the ETag's provisional oid.
    #[error(
        "the pointer still carries the provisional oid of {url} (from its ETag): a clone could not verify it; wait for its hash (drsctl status), run drsctl promote and commit"
    )]
    Provisional { url: String },
    /// The repo's copy is not the object, or cannot be sent as set up.
    #[error(
        "{error}: get a good copy (git lfs fetch {remote}; git lfs fsck names bad ones), or remove the commit that adds it"
    )]
    BadCopy {
        #[source]
        error: TransferError,
        remote: String,
    },
    /// A foreign object whose prefetch has not finished.
    #[error(
        "not on this machine yet (its prefetch has not finished: drsctl status) and its source cannot be copied server-side"
    )]
    NotYetHere,
    /// Neither here, nor in the object remote, nor added by URL.
    #[error(
        "the object is in neither .git/lfs/objects, the pool, nor the object remote {layout}, and is not an object this repo added by URL: a clone could not get it. \
         Fetch it here (git lfs fetch {remote} --all), or push it from a clone that has it (git lfs push --object-id {remote} {oid}), or remove the commit that adds it"
    )]
    Nowhere {
        layout: String,
        remote: String,
        oid: Oid,
    },
    /// A foreign object not here whose source could not be read.
    #[error("not on this machine, and reading it from {url} failed: {error}")]
    Unreadable {
        url: String,
        #[source]
        error: ResolveError,
    },
    /// The source of a server-side copy is no longer the version added.
    #[error(transparent)]
    SourceChanged(#[from] SourceChanged),
    /// Refused for `why`, and the object remote holds something else under
    /// its name (`other` says what).
    #[error("{why}; and {other}")]
    AndInRemote {
        why: Box<PushRefusal>,
        other: String,
    },
}

/// The source of a foreign object's server-side copy is no longer the
/// version added (the copy's words say how).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SourceChanged(String);

/// Where the push's objects go and come from.
pub struct PushTarget<'a> {
    pub layout: &'a ObjectRemote,
    /// The repo's `lfs/objects`.
    pub lfs_objects: &'a Path,
    /// The git remote pushed to, for the advice in a refusal.
    pub remote: &'a str,
}

impl Transfers {
    /// Sends every object the push of `updates` (git's pre-push lines) to
    /// `remote` introduces to the repo's object remote, `PARALLEL` at a
    /// time; `progress(done, total)` after each.
    pub async fn pre_push(
        &self,
        repo: &Path,
        remote: &str,
        updates: String,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<PushReport, TransferError> {
        let started = std::time::Instant::now();
        let facts = self.facts(repo).await?;
        let objects = {
            let (repo, remote) = (repo.to_path_buf(), remote.to_string());
            blocking(move || pushed_pointers(&repo, &remote, &updates))
                .await
                .map_err(TransferError::Pointers)?
        };
        let foreign = self.foreign_objects(repo).await?;
        let superseded = superseded(&foreign, &objects);
        let total = objects.len() as u64;
        let mut report = PushReport {
            objects: total,
            ..PushReport::default()
        };
        if facts.remote.is_none() {
            report.refused = objects.into_iter().map(no_object_remote).collect();
            return Ok(report);
        }
        let layout = facts.object_remote(repo)?;
        let lfs_objects = facts.lfs.join("objects");
        if let ObjectRemote::Gen3(commons) = &layout {
            let (authz, objects_dir) = (facts.authz.as_slice(), lfs_objects.as_path());
            return self
                .pre_push_commons(
                    commons,
                    &layout,
                    authz,
                    objects_dir,
                    objects,
                    &foreign,
                    &superseded,
                    report,
                    progress,
                )
                .await;
        }
        let target = PushTarget {
            layout: &layout,
            lfs_objects: &lfs_objects,
            remote,
        };
        let indexd = self.indexd_target(&facts, &layout)?;
        // In batches: the batch's small objects of the repo's own are read
        // once from `.git/lfs/objects`, checked and taken into the pool in
        // one transaction (`take_in_small`), then sent from memory; the
        // next batch is read while this one is sent.
        let fast = indexd.is_none();
        let mut batches: Vec<Vec<Pushed>> = Vec::new();
        let mut objects = objects.into_iter().peekable();
        while objects.peek().is_some() {
            batches.push(objects.by_ref().take(SMALL_BATCH).collect());
        }
        let smalls: Vec<Vec<Pointer>> = batches
            .iter()
            .map(|batch| {
                batch
                    .iter()
                    .map(|p| p.pointer)
                    .filter(|p| {
                        fast && !superseded.contains(&p.oid)
                            && !foreign.contains_key(&p.oid)
                            && self.pool.tier_for(p.size) == crate::pool::Tier::Kv
                    })
                    .collect()
            })
            .collect();
        let take_in = |i: usize| {
            let small = smalls.get(i).cloned().unwrap_or_default();
            self.take_in_small(lfs_objects.clone(), small)
        };
        let mut read = take_in(0).await;
        let mut done = 0;
        for (i, batch) in batches.into_iter().enumerate() {
            // Held while the batch is sent, dropped with it.
            let _prepared = self.prepare_reads(&batch, &foreign, &superseded).await;
            let with_bytes: Vec<(Pushed, Option<Vec<u8>>)> = batch
                .into_iter()
                .map(|p| {
                    let bytes = read.remove(&p.pointer.oid);
                    (p, bytes)
                })
                .collect();
            let send = async {
                let mut results = stream::iter(with_bytes)
                    .map(|(pushed, bytes)| {
                        let (target, foreign, superseded) = (&target, &foreign, &superseded);
                        let indexd = indexd.as_ref();
                        async move {
                            let oid = pushed.pointer.oid;
                            if superseded.contains(&oid) {
                                return (pushed, Registered::Not(PushOutcome::Present));
                            }
                            if let Some(bytes) = bytes {
                                let outcome = self.send_bytes(target, oid, bytes).await;
                                return (pushed, Registered::Not(outcome));
                            }
                            let entry = foreign.get(&oid);
                            let outcome = match indexd {
                                Some(ix) => self.push_registered(target, ix, entry, &pushed).await,
                                None => Registered::Not(
                                    self.push_object(target, entry, &pushed.pointer).await,
                                ),
                            };
                            (pushed, outcome)
                        }
                    })
                    .buffer_unordered(PARALLEL);
                while let Some((pushed, outcome)) = results.next().await {
                    let outcome = match outcome {
                        Registered::Held => {
                            report.in_indexd += 1;
                            PushOutcome::Present
                        }
                        Registered::Trusted(base) => {
                            report.in_indexd += 1;
                            PushOutcome::Trusted(base)
                        }
                        Registered::Now(o) => {
                            report.registered += 1;
                            o
                        }
                        Registered::Not(o) => o,
                    };
                    tally(&mut report, pushed, outcome);
                    done += 1;
                    progress(done, total);
                }
            };
            let ((), next) = tokio::join!(send, take_in(i + 1));
            read = next;
        }
        if indexd.is_some() && !foreign.is_empty() {
            self.mirror_dids(&facts).await;
        }
        log::info!(
            "pre-push {}: {} objects, {} uploaded, {} copied, {} present, {} failed, {} refused, in {:.2} s",
            repo.display(),
            report.objects,
            report.uploaded,
            report.copied,
            report.present,
            report.failed.len(),
            report.refused.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(report)
    }

    /// The repo's Indexd, when it records one.
    fn indexd_target<'f>(
        &self,
        facts: &'f RepoFacts,
        objects: &ObjectRemote,
    ) -> Result<Option<IndexdTarget<'f>>, TransferError> {
        let Some(base) = &facts.indexd else {
            return Ok(None);
        };
        if objects.s3().is_none() {
            return Err(TransferError::IndexdNeedsS3 {
                top: facts.top.clone(),
                objects: objects.to_string(),
            });
        }
        self.trusted_indexd(base)?;
        let client = self.remote.indexd(base).map_err(TransferError::Drs)?;
        Ok(Some(IndexdTarget {
            client,
            base: base.as_str().trim_end_matches('/').to_string(),
            authz: &facts.authz,
        }))
    }

    /// Rewrites the repo's mirror, so the DRS ids Indexd gave its foreign
    /// objects are in it too. A failure is logged: the registry has them,
    /// and the next rewrite catches the mirror up.
    async fn mirror_dids(&self, facts: &RepoFacts) {
        let (registry, top) = (self.registry.clone(), facts.top.clone());
        let Some(common) = facts.lfs.parent().map(Path::to_path_buf) else {
            return;
        };
        let written = blocking(move || -> Result<(), crate::registry::RegistryError> {
            registry.rewrite_mirror(&top, &common)
        })
        .await;
        if let Err(e) = written {
            log::warn!("rewriting the mirror of {}: {e}", facts.top.display());
        }
    }

    /// The reads of `drs://` objects the batch is about to make, prepared
    /// in bulk (`remote::prepared`): its foreign objects that a push reads
    /// through the pool, with a content oid and not in the pool already.
    async fn prepare_reads(
        &self,
        batch: &[Pushed],
        foreign: &BTreeMap<Oid, Entry>,
        superseded: &HashSet<Oid>,
    ) -> PreparedBatch {
        let candidates: Vec<(Oid, DrsUri)> = batch
            .iter()
            .filter(|p| !superseded.contains(&p.pointer.oid))
            .filter_map(|p| {
                let entry = foreign.get(&p.pointer.oid)?;
                match ObjectUrl::parse(entry.object.url.expose()) {
                    Ok(ObjectUrl::Drs(uri)) if !entry.is_provisional() => {
                        Some((p.pointer.oid, uri))
                    }
                    _ => None,
                }
            })
            .collect();
        let pool = self.pool.clone();
        let uris: Vec<DrsUri> = blocking(move || {
            candidates
                .into_iter()
                .filter(|(oid, _)| !matches!(pool.size(oid), Ok(Some(_))))
                .map(|(_, uri)| uri)
                .collect()
        })
        .await;
        self.remote.prepare_drs_reads(&uris).await
    }

    /// The repo's foreign objects (added by URL), by oid.
    async fn foreign_objects(&self, repo: &Path) -> Result<BTreeMap<Oid, Entry>, TransferError> {
        let (registry, repo) = (self.registry.clone(), repo.to_path_buf());
        Ok(blocking(move || registry.for_repo(&repo))
            .await
            .map_err(TransferError::Registry)?
            .into_iter()
            .map(|e| (e.oid, e))
            .collect())
    }

    /// Puts one pushed object in the object remote: a foreign object by a
    /// server-side copy of its source (into an S3 remote), else from
    /// `.git/lfs/objects` or the pool, else read from its source into the
    /// pool first (a `drs://` object; any foreign object bound for a folder
    /// remote, which has no server-side copy); present when the object
    /// remote holds it already.
    pub async fn push_object(
        &self,
        target: &PushTarget<'_>,
        foreign: Option<&Entry>,
        pointer: &Pointer,
    ) -> PushOutcome {
        if let Some(entry) = foreign {
            let o = &entry.object;
            if entry.is_provisional() {
                return PushOutcome::Refused(PushRefusal::Provisional {
                    url: o.url.to_string(),
                });
            }
            let url = ObjectUrl::parse(o.url.expose());
            // A server-side copy only of bytes shown to be the object: read
            // and hashed here at this ETag. A content oid a header, a DRS
            // record or `--sha256` named is a claim, and the source is
            // read through the pool below instead (DESIGN.md "Trust").
            let copyable = o.content_read && o.content_oid == Some(pointer.oid);
            if let (Ok(ObjectUrl::S3 { bucket, key }), Some(layout), true) =
                (url, target.layout.s3(), copyable)
            {
                let source = CopySource {
                    bucket: &bucket,
                    key: &key,
                    etag: Some(o.etag.as_str()).filter(|e| !e.is_empty()),
                    size: o.size,
                };
                let why = match self.copy(target, layout, &source, pointer).await {
                    Err(changed) => PushRefusal::SourceChanged(changed),
                    Ok(outcome) => return outcome,
                };
                // The source changed or is gone; the bytes its prefetch
                // verified may still be here, and they are what the
                // pointer names.
                return match self.push_local(target, pointer).await {
                    Some(outcome) => outcome,
                    None => self.unless_in_remote(target, pointer, why).await,
                };
            }
        }
        if let Some(outcome) = self.push_local(target, pointer).await {
            return outcome;
        }
        if let Some(url) = foreign.and_then(|e| through_pool(e, target.layout)) {
            return self.push_through_pool(target, &url, pointer).await;
        }
        let why = match foreign {
            Some(_) => PushRefusal::NotYetHere,
            None => PushRefusal::Nowhere {
                layout: target.layout.to_string(),
                remote: target.remote.to_string(),
                oid: pointer.oid,
            },
        };
        self.unless_in_remote(target, pointer, why).await
    }

    /// A foreign object not on this machine: read from its source (a
    /// `drs://` one through its DRS server) into the pool, checked against
    /// the oid, then sent. Unless the object remote holds it already.
    async fn push_through_pool(
        &self,
        target: &PushTarget<'_>,
        url: &ObjectUrl,
        pointer: &Pointer,
    ) -> PushOutcome {
        let (oid, size) = (pointer.oid, pointer.size);
        let held = self
            .remote
            .proves_held(self.pool.clone(), target.layout, oid, size)
            .await;
        match held {
            Ok(Held::Proven) => {
                self.confirmed.record(target.layout, oid);
                return PushOutcome::Present;
            }
            Ok(Held::Trusted) => {
                self.confirmed.record(target.layout, oid);
                return PushOutcome::Trusted(target.layout.url());
            }
            _ => {}
        }
        let read = self
            .remote
            .fetch_verified(self.pool.clone(), url, oid, size, &|_| {})
            .await;
        match read {
            Ok(_) => match self.push_local(target, pointer).await {
                Some(outcome) => outcome,
                None => PushOutcome::Failed(PushFailure::LeftThePool {
                    url: url.to_string(),
                }),
            },
            Err(e) => {
                let why = PushRefusal::Unreadable {
                    url: url.to_string(),
                    error: e,
                };
                self.unless_in_remote(target, pointer, why).await
            }
        }
    }

    /// The server-side copy of a foreign object's source; `Err` when the
    /// source is no longer the version added.
    async fn copy(
        &self,
        target: &PushTarget<'_>,
        layout: &crate::stores::ObjectLayout,
        source: &CopySource<'_>,
        pointer: &Pointer,
    ) -> Result<PushOutcome, SourceChanged> {
        let copied = self
            .remote
            .copy_verified(source, layout, pointer.oid, self.upload)
            .await;
        Ok(match copied {
            CopyOutcome::Present => {
                self.confirmed.record(target.layout, pointer.oid);
                PushOutcome::Present
            }
            CopyOutcome::Copied => {
                self.confirmed.record(target.layout, pointer.oid);
                PushOutcome::Copied
            }
            CopyOutcome::Failed(why) => PushOutcome::Failed(PushFailure::Copy(why)),
            CopyOutcome::SourceChanged(why) => return Err(SourceChanged(why)),
        })
    }

    /// Present when the object remote holds the object whole (pushed from
    /// another clone, say); else refused with `why`. A store that cannot be
    /// asked fails the push: an object not shown to be there is not
    /// published.
    async fn unless_in_remote(
        &self,
        target: &PushTarget<'_>,
        pointer: &Pointer,
        why: PushRefusal,
    ) -> PushOutcome {
        let held = self
            .remote
            .proves_held(self.pool.clone(), target.layout, pointer.oid, pointer.size)
            .await;
        match held {
            Ok(Held::Proven) => {
                self.confirmed.record(target.layout, pointer.oid);
                PushOutcome::Present
            }
            Ok(Held::Trusted) => {
                self.confirmed.record(target.layout, pointer.oid);
                PushOutcome::Trusted(target.layout.url())
            }
            Ok(Held::Absent) => PushOutcome::Refused(why),
            Ok(Held::Other(other)) => PushOutcome::Refused(PushRefusal::AndInRemote {
                why: Box::new(why),
                other,
            }),
            Err(error) => PushOutcome::Failed(PushFailure::Unchecked { why, error }),
        }
    }

    /// Reads the small objects in `pointers` from `lfs_objects`, keeps
    /// those whose bytes are what their oid names, and puts them in the
    /// pool in one transaction: each read once, for the pool and the
    /// upload. The others (absent, another size, other bytes) are left to
    /// the full path, which says what is wrong. A pool that cannot take
    /// them does not stop the push: the pool is a cache.
    async fn take_in_small(
        &self,
        lfs_objects: PathBuf,
        pointers: Vec<Pointer>,
    ) -> HashMap<Oid, Vec<u8>> {
        if pointers.is_empty() {
            return HashMap::new();
        }
        let pool = self.pool.clone();
        blocking(move || {
            let read: HashMap<Oid, Vec<u8>> = pointers
                .iter()
                .filter_map(|p| {
                    let bytes = std::fs::read(object_path(&lfs_objects, &p.oid)).ok()?;
                    (bytes.len() as u64 == p.size && Oid::of(&bytes) == p.oid)
                        .then_some((p.oid, bytes))
                })
                .collect();
            let entries: Vec<(Oid, &[u8])> =
                read.iter().map(|(oid, b)| (*oid, b.as_slice())).collect();
            if let Err(e) = pool.put_many(&entries) {
                log::warn!(
                    "{} pushed objects could not go into the pool ({e}); they are sent all the same",
                    entries.len()
                );
            }
            read
        })
        .await
    }

    /// Sends `bytes`, checked to be object `oid`, unless the object remote
    /// holds it (or this daemon saw it there lately).
    async fn send_bytes(&self, target: &PushTarget<'_>, oid: Oid, bytes: Vec<u8>) -> PushOutcome {
        if self.confirmed.holds(target.layout, oid) {
            return PushOutcome::Present;
        }
        match self
            .remote
            .upload_bytes(target.layout, oid, bytes, self.upload)
            .await
        {
            Ok(uploaded) => {
                self.confirmed.record(target.layout, oid);
                match uploaded {
                    crate::remote::Uploaded::Skipped(_) => PushOutcome::Present,
                    _ => PushOutcome::Uploaded,
                }
            }
            Err(e) => PushOutcome::Failed(PushFailure::SendBytes(e)),
        }
    }

    /// Sends the object from `.git/lfs/objects` or the pool; `None` when
    /// neither has it.
    async fn push_local(&self, target: &PushTarget<'_>, pointer: &Pointer) -> Option<PushOutcome> {
        let path = object_path(target.lfs_objects, &pointer.oid);
        match self
            .send_local(target.layout, pointer.oid, pointer.size, path)
            .await
        {
            Ok(true) => Some(PushOutcome::Present),
            Ok(false) => Some(PushOutcome::Uploaded),
            Err(TransferError::NotHere { .. }) => None,
            Err(e) if e.refuses_the_object() => Some(PushOutcome::Refused(PushRefusal::BadCopy {
                error: e,
                remote: target.remote.to_string(),
            })),
            Err(e) => Some(PushOutcome::Failed(PushFailure::Send(e))),
        }
    }
}

/// A provisional oid left in history by a commit before its promotion:
/// superseded by its content oid, which this push must then carry too.
fn superseded(foreign: &BTreeMap<Oid, Entry>, objects: &[Pushed]) -> HashSet<Oid> {
    let pushed_oids: HashSet<Oid> = objects.iter().map(|p| p.pointer.oid).collect();
    foreign
        .values()
        .filter_map(|e| {
            let o = &e.object;
            let content = o.content_oid?;
            (o.provisional_oid != content && pushed_oids.contains(&content))
                .then_some(o.provisional_oid)
        })
        .collect()
}

/// No object remote recorded: nothing can be shown to be where a clone
/// would look, and the agent would have nowhere to send it.
fn no_object_remote(p: Pushed) -> RefusedPath {
    RefusedPath {
        oid: p.pointer.oid,
        paths: p.paths,
        why: "the repo has no object remote to send it to: record one with drsctl init --remote s3://bucket/prefix and commit .gitattributes".into(),
    }
}

pub(super) fn tally(report: &mut PushReport, pushed: Pushed, outcome: PushOutcome) {
    let refused = |why: String| RefusedPath {
        oid: pushed.pointer.oid,
        paths: pushed.paths,
        why,
    };
    match outcome {
        PushOutcome::Present => report.present += 1,
        PushOutcome::Trusted(source) => {
            report.present += 1;
            report.trusted += 1;
            if !report.trusted_sources.contains(&source) {
                report.trusted_sources.push(source);
            }
        }
        PushOutcome::Uploaded => report.uploaded += 1,
        PushOutcome::Copied => report.copied += 1,
        PushOutcome::Failed(why) => report.failed.push(refused(why.to_string())),
        PushOutcome::Refused(why) => report.refused.push(refused(why.to_string())),
    }
}

/// The URL a foreign object not on this machine is read from on its way to
/// `objects`, checked against the oid: any but an `s3://` source whose
/// bytes were read here, which an S3 remote copies server-side instead.
fn through_pool(entry: &Entry, objects: &ObjectRemote) -> Option<ObjectUrl> {
    let read = entry.object.content_read;
    ObjectUrl::parse(entry.object.url.expose())
        .ok()
        .filter(|u| !(matches!(u, ObjectUrl::S3 { .. }) && objects.s3().is_some() && read))
}
