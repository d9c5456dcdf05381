//! Pushing to a repo that records a Gen3 Indexd (`drsctl init --indexd`).
//! For each object the push introduces:
//!
//! - an Indexd record holding it (`held.rs`, the decision the Gen3 commons'
//!   push makes too), at a location shown to hold its bytes (its store's
//!   MD5 against ours, or read and hashed: a record and a HEAD are
//!   claims), means the object is held already: nothing is sent, copied or
//!   registered, and the agent's upload of it is answered from `confirmed`.
//!   A record of its md5 only so shown gets a version naming its sha256;
//! - otherwise the object goes to the object remote as without Indexd, and
//!   is then registered (`POST /index/`) with its sha256, md5, ETag, size,
//!   `s3://` location, path and `authz`.
//!
//! The registry records a registration as begun before it is sent, and its
//! did once answered: a push killed in between leaves the registry knowing,
//! and the next push finds the record Indexd made by its sha256 instead of
//! making a second one. An Indexd that cannot be asked fails the push before
//! anything is sent: nothing is half-registered.

use tokio::sync::OnceCell;

use super::held::{self, By, HeldError};
use crate::blocking;
use crate::lfs::{Pointer, Pushed};
use crate::ops::transfer::push::{PushFailure, PushOutcome, PushTarget};
use crate::ops::transfer::{TransferError, Transfers};
use crate::pool::{Oid, PoolError};
use crate::registry::{Entry, RegistryError};
use crate::remote::Held;
use crate::stores::drs::{DrsError, IndexdClient, IndexdRecord, NewRecord};
use crate::stores::is_content_etag;
use crate::stores::{ObjectUrl, RemoteError};

/// Why an object pushed to a repo with an Indexd fails: Indexd could not
/// be asked before anything was sent, or the object, now in the object
/// remote, could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum IndexdPushError {
    /// Whether Indexd holds the object could not be said.
    #[error("Indexd {base}: {error}; nothing was sent or registered, push again")]
    Held {
        base: String,
        #[source]
        error: HeldError,
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
    Read(#[source] PoolError),
}

/// The repo's Indexd, for one push.
pub struct IndexdTarget<'a> {
    pub client: IndexdClient,
    /// Its base URL, as the registry keys registrations by it.
    pub base: String,
    pub authz: &'a [String],
}

/// An Indexd's records shown to hold an object by their locations
/// ([`Transfers::location_proven`]); a record naming the object's sha256,
/// from an Indexd the user trusts at its word (`trust_claims`), by a
/// location that answers with the object's size.
struct IndexdProof<'t, 'a> {
    transfers: &'t Transfers,
    target: &'t PushTarget<'a>,
    indexd: &'t IndexdTarget<'a>,
    foreign: Option<&'t Entry>,
    pointer: Pointer,
    /// The md5 of the bytes here, read once for every location and for the
    /// md5-only records (`None` inside: no bytes here).
    md5: &'t OnceCell<Option<String>>,
}

impl IndexdProof<'_, '_> {
    /// The md5 of the bytes here, once read.
    async fn md5(&self) -> Option<String> {
        local_md5(self.transfers, self.md5, self.foreign, self.pointer.oid).await
    }

    /// Whether `url`, named by Indexd record `did`, holds the object's
    /// bytes: the object remote's own key proven as a push proves it; any
    /// other location by its store's single-part MD5 ETag against the md5
    /// of the bytes here, else read and hashed against the oid (into the
    /// pool, where the push then finds it). `trusted`: a location that
    /// answers with the object's size is enough. A location that fails is
    /// logged with the record, and the push goes on as if it were not.
    async fn location_proven(&self, did: &str, url: &str, trusted: bool) -> bool {
        let (transfers, target) = (self.transfers, self.target);
        let (oid, size) = (self.pointer.oid, self.pointer.size);
        let Ok(parsed) = ObjectUrl::parse(url) else {
            return false;
        };
        if url == target.layout.location(&oid) {
            let held = transfers
                .remote
                .proves_held(transfers.pool.clone(), target.layout, oid, size)
                .await;
            return matches!(held, Ok(Held::Proven | Held::Trusted));
        }
        let meta = match transfers.remote.head(&parsed).await {
            Ok(Some(meta)) if meta.size == size && trusted => return true,
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
            if let Some(md5) = self.md5().await {
                let same = md5 == store_md5;
                if !same {
                    log::warn!("Indexd record {did} names {parsed} for object {oid}, but its bytes have md5 {store_md5}, not {md5}: not counted as held");
                }
                return same;
            }
        }
        let pool = transfers.pool.clone();
        match transfers
            .remote
            .fetch_verified(pool, &parsed, oid, size, &|_| {})
            .await
        {
            Ok(_) => true,
            Err(e) => {
                log::warn!("Indexd record {did} names {parsed} for object {oid}, but reading it did not show the object: {e}; not counted as held");
                false
            }
        }
    }
}

/// The md5 recorded by a read of the object's bytes here, else of the
/// pool's copy, read once into `cell`; `None` when this machine has no
/// bytes of it.
async fn local_md5(
    transfers: &Transfers,
    cell: &OnceCell<Option<String>>,
    foreign: Option<&Entry>,
    oid: Oid,
) -> Option<String> {
    cell.get_or_init(|| async {
        let read = foreign
            .filter(|e| e.object.content_read && e.object.content_oid == Some(oid))
            .and_then(|e| e.object.md5.clone());
        match read {
            Some(md5) => Some(md5.to_ascii_lowercase()),
            None => transfers.pool_md5(oid).await.ok(),
        }
    })
    .await
    .clone()
}

impl held::Proof for IndexdProof<'_, '_> {
    async fn holds(&mut self, record: &IndexdRecord, by: By) -> Result<bool, HeldError> {
        let trusted = by == By::Sha256 && self.transfers.remote.trusts(&self.indexd.base);
        for url in &record.urls {
            if self.location_proven(&record.did, url, trusted).await {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn add_sha256_version(&self, record: &IndexdRecord) -> Result<String, DrsError> {
        let client = &self.indexd.client;
        client.add_sha256_version(record, self.pointer.oid).await
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
    pub(in crate::ops::transfer) fn trusted_indexd(
        &self,
        base: &url::Url,
    ) -> Result<(), TransferError> {
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

    /// The did of a record of `pointer`'s content shown to hold it
    /// (`held.rs`); `Err` when Indexd cannot be asked.
    async fn held_in_indexd(
        &self,
        target: &PushTarget<'_>,
        indexd: &IndexdTarget<'_>,
        foreign: Option<&Entry>,
        pointer: &Pointer,
    ) -> Result<Option<String>, IndexdPushError> {
        let failed = |error| IndexdPushError::Held {
            base: indexd.base.clone(),
            error,
        };
        let md5 = OnceCell::new();
        let mut proof = IndexdProof {
            transfers: self,
            target,
            indexd,
            foreign,
            pointer: *pointer,
            md5: &md5,
        };
        let client = &indexd.client;
        if let Some(did) = held::by_sha256(client, *pointer, &mut proof)
            .await
            .map_err(failed)?
        {
            return Ok(Some(did));
        }
        let name = format!("Indexd {}", indexd.base);
        let ours = async { Ok(local_md5(self, &md5, foreign, pointer.oid).await) };
        held::by_md5(client, &name, *pointer, ours, &mut proof)
            .await
            .map_err(failed)
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
            crate::remote::digest::md5_hex(&blob).map_err(Md5Error::Read)
        })
        .await
    }
}
