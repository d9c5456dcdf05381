//! Pushing to a repo that records a Gen3 Indexd (`drsctl init --indexd`).
//! For each object the push introduces:
//!
//! - an Indexd record of the same sha256 and size at a location shown to
//!   hold those bytes (its store's MD5 against ours, or read and hashed:
//!   a record and a HEAD are claims) means the object is held already:
//!   nothing is sent, copied or registered, and the agent's upload of it is
//!   answered from `confirmed`;
//! - else a record of the same md5 and size naming no sha256 (most Gen3
//!   records), at a location so shown, is the object too: a new version of
//!   it (`POST /index/{did}`, same `baseid`) carrying the sha256 is added,
//!   and nothing is sent or copied;
//! - otherwise the object goes to the object remote as without Indexd, and
//!   is then registered (`POST /index/`) with its sha256, md5, ETag, size,
//!   `s3://` location, path and `authz`.
//!
//! The registry records a registration as begun before it is sent, and its
//! did once answered: a push killed in between leaves the registry knowing,
//! and the next push finds the record Indexd made by its sha256 instead of
//! making a second one. An Indexd that cannot be asked fails the push before
//! anything is sent: nothing is half-registered.

use md5::{Digest, Md5};

use super::push::{PushFailure, PushOutcome, PushTarget};
use super::{TransferError, Transfers};
use crate::blocking;
use crate::lfs::{Pointer, Pushed};
use crate::pool::{Oid, PoolError};
use crate::registry::{Entry, RegistryError};
use crate::remote::Held;
use crate::stores::drs::{DrsError, IndexdClient, NewRecord};
use crate::stores::is_content_etag;
use crate::stores::{ObjectUrl, RemoteError};

/// Why an object pushed to a repo with an Indexd fails: Indexd could not
/// be asked before anything was sent, or the object, now in the object
/// remote, could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum IndexdPushError {
    /// Asking Indexd for records of the object's sha256.
    #[error(
        "Indexd {base} could not be asked whether it holds the object: {error}; nothing was sent or registered"
    )]
    BySha256 {
        base: String,
        #[source]
        error: DrsError,
    },
    /// Asking Indexd for records of the object's md5 and size.
    #[error(
        "Indexd {base} could not be asked whether it holds the object by its md5: {error}; nothing was sent or registered"
    )]
    ByMd5 {
        base: String,
        #[source]
        error: DrsError,
    },
    /// Adding a version, naming the sha256, of record `did` (md5 only).
    #[error(
        "Indexd {base} holds object {oid} as {did} (md5 only; its bytes were shown here to have the sha256), but adding a version of it that names the sha256 failed: {error}; nothing was sent or registered, push again"
    )]
    AddVersion {
        base: String,
        oid: Oid,
        did: String,
        #[source]
        error: DrsError,
    },
    /// An Indexd record names an `s3://` location (`indexd_target` refuses
    /// any other object remote first).
    #[error("an Indexd record needs an s3:// object remote, not {objects}")]
    NeedsS3 { objects: String },
    /// Registering `location`, in the object remote, with Indexd.
    #[error(
        "{location} is in the object remote, but registering it with Indexd {base} failed: {error}; push again to register it"
    )]
    Register {
        location: String,
        base: String,
        #[source]
        error: RegisterError,
    },
}

/// What failed on the way to an Indexd record of an object in the object
/// remote.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// Asking the object remote for the object's ETag.
    #[error(transparent)]
    Head(RemoteError),
    #[error("it is not there any more")]
    Gone,
    /// Finding the object's md5.
    #[error(transparent)]
    Md5(#[from] Md5Error),
    /// Recording in the registry that the registration begins.
    #[error(transparent)]
    Registry(RegistryError),
    /// Indexd's answer to the new record.
    #[error(transparent)]
    Indexd(DrsError),
}

/// Why the md5 of an object's bytes on this machine is not known.
#[derive(Debug, thiserror::Error)]
pub enum Md5Error {
    /// Reading the pool's copy.
    #[error(transparent)]
    Pool(PoolError),
    #[error("its md5 is not known and its bytes are not on this machine")]
    NotHere,
    /// Reading the pool's copy's bytes.
    #[error("reading it for its md5: {0}")]
    Read(#[source] std::io::Error),
}

/// The repo's Indexd, for one push.
pub struct IndexdTarget<'a> {
    pub client: IndexdClient,
    /// Its base URL, as the registry keys registrations by it.
    pub base: String,
    pub authz: &'a [String],
}

/// The md5 of the bytes this machine has of a pushed object, computed
/// once per object when a location needs it.
enum LocalMd5 {
    Unknown,
    Known(Option<String>),
    /// Not needed: the Indexd is trusted at its word.
    Trusted,
}

impl LocalMd5 {
    /// The md5 recorded by a read of the object's bytes here, else of the
    /// pool's copy; `None` when this machine has no bytes of it.
    async fn get(
        &mut self,
        transfers: &Transfers,
        foreign: Option<&Entry>,
        oid: Oid,
    ) -> Option<String> {
        match self {
            LocalMd5::Known(md5) => return md5.clone(),
            LocalMd5::Trusted => return None,
            LocalMd5::Unknown => {}
        }
        let read = foreign
            .filter(|e| e.object.content_read && e.object.content_oid == Some(oid))
            .and_then(|e| e.object.md5.clone());
        let md5 = match read {
            Some(md5) => Some(md5.to_ascii_lowercase()),
            None => transfers.pool_md5(oid).await.ok(),
        };
        *self = LocalMd5::Known(md5.clone());
        md5
    }
}

/// How a pushed object stands with Indexd after the push.
pub enum Registered {
    /// Indexd held it already at a location shown to hold it: present.
    Held,
    /// Indexd claims it, and the user trusts that Indexd at its word
    /// (`trust_claims`): present, the bytes not shown.
    Trusted(String),
    /// Sent (or found) in the object remote, and registered now.
    Now(PushOutcome),
    /// Not registered by this push: pushed without Indexd, or it failed.
    Not(PushOutcome),
}

impl Transfers {
    /// The repo's Indexd, `base`, must be a server the user named in
    /// `DRSD_DRS_SERVERS`: `.gitattributes` comes with a clone, and a
    /// hostile repo must not choose where this user's pushes register
    /// objects (with their netrc login) or where downloads are looked up.
    pub(super) fn trusted_indexd(&self, base: &url::Url) -> Result<(), TransferError> {
        let drs = self.remote.drs().map_err(TransferError::Drs)?;
        if drs.servers().names(base) {
            return Ok(());
        }
        Err(TransferError::UntrustedIndexd { base: base.clone() })
    }

    /// Pushes one object to a repo with an Indexd; see the module's notes.
    pub async fn push_registered(
        &self,
        target: &PushTarget<'_>,
        indexd: &IndexdTarget<'_>,
        foreign: Option<&Entry>,
        pushed: &Pushed,
    ) -> Registered {
        let pointer = &pushed.pointer;
        match self.held_in_indexd(target, indexd, foreign, pointer).await {
            Err(why) => return Registered::Not(PushOutcome::Failed(PushFailure::Indexd(why))),
            Ok(Some(did)) => {
                self.remember_did(indexd, pointer.oid, &did).await;
                self.confirmed.record(target.layout, pointer.oid);
                if self.remote.trusts(&indexd.base) {
                    return Registered::Trusted(indexd.base.clone());
                }
                return Registered::Held;
            }
            Ok(None) => {}
        }
        let outcome = self.push_object(target, foreign, pointer).await;
        if !matches!(
            outcome,
            PushOutcome::Present
                | PushOutcome::Trusted(_)
                | PushOutcome::Uploaded
                | PushOutcome::Copied
        ) {
            return Registered::Not(outcome);
        }
        match self.register(target, indexd, foreign, pushed).await {
            Ok(()) => Registered::Now(outcome),
            Err(why) => Registered::Not(PushOutcome::Failed(PushFailure::Indexd(why))),
        }
    }

    /// The did of a record of `pointer`'s content (sha256 and size) at a
    /// location shown to hold those bytes; `Err` when Indexd cannot be
    /// asked. A record is a claim (whoever registered it chose its sha256
    /// and its URL), and so is a HEAD's size: a location counts only once
    /// its bytes are shown to be the object ([`Self::location_proven`]).
    async fn held_in_indexd(
        &self,
        target: &PushTarget<'_>,
        indexd: &IndexdTarget<'_>,
        foreign: Option<&Entry>,
        pointer: &Pointer,
    ) -> Result<Option<String>, IndexdPushError> {
        let records = indexd
            .client
            .by_sha256(pointer.oid)
            .await
            .map_err(|error| IndexdPushError::BySha256 {
                base: indexd.base.clone(),
                error,
            })?;
        // Trusted at its word (`trust_claims`): a record at a location
        // that answers with the size counts, as the user asked.
        let mut ours = match self.remote.trusts(&indexd.base) {
            true => LocalMd5::Trusted,
            false => LocalMd5::Unknown,
        };
        for record in records {
            if record.size.is_some_and(|s| s != pointer.size) {
                continue;
            }
            for url in &record.urls {
                if self
                    .location_proven(target, &record.did, url, foreign, pointer, &mut ours)
                    .await
                {
                    return Ok(Some(record.did));
                }
            }
        }
        self.held_by_md5(target, indexd, foreign, pointer, ours)
            .await
    }

    /// The did of a new version, carrying the sha256, of a record that
    /// names `pointer`'s md5 and size but no sha256 (most Gen3 records), at
    /// a location shown to hold the bytes; `Err` when Indexd cannot be
    /// asked or refuses the version. The md5 and size are claims like any
    /// other: the location counts only as [`Self::location_proven`] says
    /// (its MD5 ETag equal to the md5 of the bytes here, whose sha256 is
    /// checked, or read and hashed), even from an Indexd in `trust_claims`,
    /// whose word is about the sha256 it names and this record names none.
    /// Then what is now known is published without a second copy of the
    /// bytes: `POST /index/{did}` (same `baseid`), found by the next push
    /// and by a clone asking by sha256. Without bytes here there is no md5
    /// to ask by, and nothing is asked.
    async fn held_by_md5(
        &self,
        target: &PushTarget<'_>,
        indexd: &IndexdTarget<'_>,
        foreign: Option<&Entry>,
        pointer: &Pointer,
        ours: LocalMd5,
    ) -> Result<Option<String>, IndexdPushError> {
        let mut ours = match ours {
            LocalMd5::Trusted => LocalMd5::Unknown,
            known => known,
        };
        let Some(md5) = ours.get(self, foreign, pointer.oid).await else {
            return Ok(None);
        };
        let records = indexd
            .client
            .by_md5_only(&md5, pointer.size)
            .await
            .map_err(|error| IndexdPushError::ByMd5 {
                base: indexd.base.clone(),
                error,
            })?;
        for record in records {
            for url in &record.urls {
                if !self
                    .location_proven(target, &record.did, url, foreign, pointer, &mut ours)
                    .await
                {
                    continue;
                }
                let did = indexd
                    .client
                    .add_sha256_version(&record, pointer.oid)
                    .await
                    .map_err(|error| IndexdPushError::AddVersion {
                        base: indexd.base.clone(),
                        oid: pointer.oid,
                        did: record.did.clone(),
                        error,
                    })?;
                log::info!(
                    "Indexd {} held object {} as {} under its md5 only; its bytes at {} were shown to have the sha256, published as version {did}",
                    indexd.base,
                    pointer.oid,
                    record.did,
                    crate::stores::redacted(url)
                );
                return Ok(Some(did));
            }
        }
        Ok(None)
    }

    /// Whether `url`, named by Indexd record `did`, holds `pointer`'s
    /// bytes: the object remote's own key proven as a push proves it; any
    /// other location by its store's single-part MD5 ETag against the md5
    /// of the bytes here, else read and hashed against the oid (into the
    /// pool, where the push then finds it). A location that fails is
    /// logged with the record, and the push goes on as if it were not.
    async fn location_proven(
        &self,
        target: &PushTarget<'_>,
        did: &str,
        url: &str,
        foreign: Option<&Entry>,
        pointer: &Pointer,
        ours: &mut LocalMd5,
    ) -> bool {
        let (oid, size) = (pointer.oid, pointer.size);
        let Ok(parsed) = ObjectUrl::parse(url) else {
            return false;
        };
        if url == target.layout.location(&oid) {
            let held = self
                .remote
                .proves_held(self.pool.clone(), target.layout, oid, size)
                .await;
            return matches!(held, Ok(Held::Proven | Held::Trusted));
        }
        let meta = match self.remote.head(&parsed).await {
            Ok(Some(meta)) if meta.size == size && matches!(ours, LocalMd5::Trusted) => {
                return true
            }
            Ok(Some(meta)) if meta.size == size => meta,
            Ok(_) => return false,
            Err(e) => {
                log::debug!("Indexd record {did}: {parsed}: {e}");
                return false;
            }
        };
        let store_md5 = meta
            .etag
            .as_deref()
            .map(|e| e.trim_matches('"').to_ascii_lowercase())
            .filter(|e| is_content_etag(e) && !e.contains('-'));
        if let Some(store_md5) = store_md5 {
            if let Some(md5) = ours.get(self, foreign, oid).await {
                let same = md5 == store_md5;
                if !same {
                    log::warn!("Indexd record {did} names {parsed} for object {oid}, but its bytes have md5 {store_md5}, not {md5}: not counted as held");
                }
                return same;
            }
        }
        match self
            .remote
            .fetch_verified(self.pool.clone(), &parsed, oid, size, &|_| {})
            .await
        {
            Ok(_) => true,
            Err(e) => {
                log::warn!("Indexd record {did} names {parsed} for object {oid}, but reading it did not show the object: {e}; not counted as held");
                false
            }
        }
    }

    /// Registers the object, now in the object remote, with Indexd.
    async fn register(
        &self,
        target: &PushTarget<'_>,
        indexd: &IndexdTarget<'_>,
        foreign: Option<&Entry>,
        pushed: &Pushed,
    ) -> Result<(), IndexdPushError> {
        let oid = pushed.pointer.oid;
        // `indexd_target` refuses any other object remote.
        let Some(layout) = target.layout.s3() else {
            return Err(IndexdPushError::NeedsS3 {
                objects: target.layout.to_string(),
            });
        };
        let key = layout.key(&oid);
        let location = format!("s3://{}/{key}", layout.bucket);
        let failed = |error: RegisterError| IndexdPushError::Register {
            location: location.clone(),
            base: indexd.base.clone(),
            error,
        };
        let etag = self.remote_etag(layout, &key).await.map_err(&failed)?;
        let md5 = self
            .md5_of(foreign, oid, etag.as_deref())
            .await
            .map_err(|e| failed(e.into()))?;
        let record = NewRecord {
            size: pushed.pointer.size,
            sha256: oid,
            md5,
            etag: etag.filter(|e| is_content_etag(e)),
            urls: vec![location.clone()],
            file_name: pushed.paths.first().cloned().unwrap_or_default(),
            authz: indexd.authz.to_vec(),
        };
        let (registry, base) = (self.registry.clone(), indexd.base.clone());
        blocking(move || registry.indexd_begin(&base, oid))
            .await
            .map_err(|e| failed(RegisterError::Registry(e)))?;
        let did = indexd
            .client
            .register(&record)
            .await
            .map_err(|e| failed(RegisterError::Indexd(e)))?;
        log::info!("registered {location} with Indexd {} as {did}", indexd.base);
        self.remember_did(indexd, oid, &did).await;
        Ok(())
    }

    /// Records `did` as the object's record in Indexd; a failure is logged:
    /// Indexd has the record, and the next push finds it by its sha256.
    async fn remember_did(&self, indexd: &IndexdTarget<'_>, oid: Oid, did: &str) {
        let (registry, base, did) = (self.registry.clone(), indexd.base.clone(), did.to_string());
        if let Err(e) = blocking(move || registry.indexd_registered(&base, oid, &did)).await {
            log::warn!("recording the Indexd record of {oid}: {e}");
        }
    }

    /// The object remote's ETag of `key`, without quotes.
    async fn remote_etag(
        &self,
        layout: &crate::stores::ObjectLayout,
        key: &str,
    ) -> Result<Option<String>, RegisterError> {
        let client = self.remote.s3().map_err(RegisterError::Head)?;
        let meta = client
            .head(&layout.bucket, key)
            .await
            .map_err(RegisterError::Head)?
            .ok_or(RegisterError::Gone)?;
        Ok(meta.etag.map(|e| e.trim_matches('"').to_string()))
    }

    /// The content's md5, hex: the registry's (from a prefetch), else a
    /// single-part ETag (which is the md5), else read from the pool.
    async fn md5_of(
        &self,
        foreign: Option<&Entry>,
        oid: Oid,
        etag: Option<&str>,
    ) -> Result<String, Md5Error> {
        let known = foreign
            .filter(|e| e.object.content_oid == Some(oid))
            .and_then(|e| e.object.md5.clone());
        if let Some(md5) = known {
            return Ok(md5);
        }
        if let Some(etag) = etag.filter(|e| is_content_etag(e) && !e.contains('-')) {
            return Ok(etag.to_ascii_lowercase());
        }
        self.pool_md5(oid).await
    }

    /// The md5 of the pool's copy of `oid` (checked against the oid).
    async fn pool_md5(&self, oid: Oid) -> Result<String, Md5Error> {
        let pool = self.pool.clone();
        blocking(move || -> Result<String, Md5Error> {
            let blob = pool
                .get_verified(&oid)
                .map_err(Md5Error::Pool)?
                .ok_or(Md5Error::NotHere)?;
            let mut hasher = Md5::new();
            std::io::copy(&mut blob.into_reader(), &mut hasher).map_err(Md5Error::Read)?;
            Ok(hex::encode(hasher.finalize()))
        })
        .await
    }
}
