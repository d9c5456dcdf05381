//! One face for every remote object: [`Remote`] chooses the client an
//! object's URL wants (the S3 client for `s3://`, the HTTPS client for
//! `https://` and `http://`) and holds the decisions that take more than
//! one request: whether a download HEADs first ([`Remote::fetch_for_pointer`])
//! and how a server-side copy is verified ([`Remote::copy_verified`],
//! `copy.rs`). A new kind of remote (DRS) is a variant of [`Located`] and
//! of `ObjectUrl`: the callers above do not change. The DRS and Indexd
//! clients ([`Remote::drs`], [`Remote::indexd`]) are kept here too.

use std::sync::Arc;

use super::clients::Clients;
use super::{fetch_into_pool, Fetch, FetchError, FetchOptions, Origin};
use crate::pool::{Oid, Pool};
use crate::settings::Settings;
use crate::stores::drs::{DrsClient, DrsError, IndexdClient, NetrcFile};
use crate::stores::{
    HttpClient, ObjectLayout, ObjectMeta, ObjectUrl, RemoteError, S3Client, UploadJournal,
};

/// The daemon's way to its remotes, with the clients it keeps.
pub struct Remote {
    clients: Clients,
    /// Signed URLs asked in bulk for a batch of DRS reads (`prepared.rs`).
    pub(super) prepared: Arc<super::prepared::PreparedReads>,
}

/// An object and the client that reaches it, as its URL chose.
pub enum Located<'a> {
    S3 {
        client: Arc<S3Client>,
        bucket: &'a str,
        key: &'a str,
    },
    Http {
        client: Arc<HttpClient>,
        url: &'a url::Url,
    },
}

impl<'a> Located<'a> {
    /// Where a download of the object reads from, sending `headers` (a DRS
    /// access URL's; none for an object named by its own URL).
    pub fn origin<'s>(&'s self, headers: &'s [(String, String)]) -> Origin<'s> {
        match self {
            Located::S3 {
                client,
                bucket,
                key,
            } => Origin::S3 {
                client,
                bucket,
                key,
            },
            Located::Http { client, url } => Origin::Http {
                client,
                url,
                headers,
            },
        }
    }
}

/// Why an object a pointer names could not be fetched from the object remote.
#[derive(Debug, thiserror::Error)]
pub enum PointerFetchError {
    /// No client: the S3 setup (endpoint, credentials) is wrong.
    #[error(transparent)]
    Setup(RemoteError),
    #[error("object {oid} is not in {object}")]
    Missing { oid: Oid, object: String },
    #[error("{object} holds {held} bytes, the pointer says {size}")]
    WrongSize {
        object: String,
        held: u64,
        size: u64,
    },
    /// The HEAD before a resumable download failed.
    #[error(transparent)]
    Head(RemoteError),
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// A folder remote's file could not be read, or is not the object.
    #[error(transparent)]
    Dir(crate::stores::dir::DirError),
}

/// Objects above this size are worth a HEAD first, for an ETag to resume by.
const RESUMABLE_FROM: u64 = 8 << 20;

impl Remote {
    /// No client is built yet; the S3 one will record its multipart uploads
    /// in `journal` (the daemon's registry), so the next start can abort
    /// those a kill left.
    /// The clients are built from `settings`.
    pub fn new(journal: Option<Arc<dyn UploadJournal>>, settings: Arc<Settings>) -> Remote {
        Remote {
            clients: Clients::new(journal, settings),
            prepared: Arc::default(),
        }
    }

    /// Whether the user trusts `source` (an object remote's URL, an
    /// Indexd's base) at its word: the `trust_claims` setting.
    pub fn trusts(&self, source: &str) -> bool {
        let settings = self.clients.settings();
        super::trusted(settings.text(crate::settings::Key::TrustClaims), source)
    }

    /// Every source the `trust_claims` setting names, for `drsctl status`.
    pub fn trusted_sources(&self) -> Vec<String> {
        let settings = self.clients.settings();
        let list = settings
            .text(crate::settings::Key::TrustClaims)
            .unwrap_or_default();
        list.split(',')
            .map(|s| s.trim().trim_end_matches('/').to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// The most one metadata request may take in all (the
    /// `metadata_timeout` setting): also the bound of add-url's read of a
    /// small object, a whole body as short as a JSON answer.
    pub fn metadata_timeout(&self) -> std::time::Duration {
        crate::stores::HttpConfig::from_settings(self.clients.settings()).metadata_timeout
    }

    /// The S3 client: the object remote of every repo is an S3 store.
    pub fn s3(&self) -> Result<Arc<S3Client>, RemoteError> {
        self.clients.s3()
    }

    /// The DRS client: `DRSD_DRS_SERVERS` and the DRS credentials, read
    /// on first use (a failure is not kept).
    pub fn drs(&self) -> Result<Arc<DrsClient>, DrsError> {
        self.clients.drs()
    }

    /// A client of the Indexd at `base`, on the DRS client's connections.
    pub fn indexd(&self, base: &url::Url) -> Result<IndexdClient, DrsError> {
        let api = self.clients.api()?;
        let netrc = NetrcFile::from_settings(self.clients.settings());
        Ok(IndexdClient::with_netrc(
            (*api).clone(),
            base.clone(),
            netrc,
        ))
    }

    /// The object at `url` and the client its scheme wants.
    pub fn locate<'a>(&self, url: &'a ObjectUrl) -> Result<Located<'a>, RemoteError> {
        Ok(match url {
            ObjectUrl::S3 { bucket, key } => Located::S3 {
                client: self.clients.s3()?,
                bucket,
                key,
            },
            ObjectUrl::Https(url) => Located::Http {
                client: self.clients.http()?,
                url,
            },
            // Read through its access URL, resolved per read (`resolved.rs`).
            ObjectUrl::Drs(uri) => {
                return Err(RemoteError::BadUrl {
                    url: uri.to_string(),
                    why: "a DRS id is read through its access URL: resolve it first".into(),
                })
            }
        })
    }

    /// What the store says about the object at `url` (`None`: not there),
    /// asking an S3 store for its checksum too, so `sha256` is filled where
    /// the store keeps one.
    pub async fn head(&self, url: &ObjectUrl) -> Result<Option<ObjectMeta>, RemoteError> {
        match self.locate(url)? {
            Located::S3 {
                client,
                bucket,
                key,
            } => client.head_checksummed(bucket, key).await,
            Located::Http { client, url } => client.head(url).await,
        }
    }

    /// Fetches the object a pointer names (`oid`, `size` bytes) from the
    /// object remote `layout` into `pool`, its sha256 checked. A large
    /// object is HEADed first for its ETag, so ranges ask `If-Match` it and
    /// a partial download can resume; a small one comes in one GET.
    pub async fn fetch_for_pointer(
        &self,
        pool: Arc<Pool>,
        layout: &ObjectLayout,
        oid: Oid,
        size: u64,
        report: &(dyn Fn(u64) + Sync),
    ) -> Result<(), PointerFetchError> {
        let client = self.s3().map_err(PointerFetchError::Setup)?;
        let key = layout.key(&oid);
        let etag = if size > RESUMABLE_FROM {
            resumable_etag(&client, layout, &key, oid, size).await?
        } else {
            None
        };
        let req = Fetch {
            origin: Origin::S3 {
                client: &client,
                bucket: &layout.bucket,
                key: &key,
            },
            size,
            etag: etag.as_deref(),
            last_modified: None, // the sha256 is the check
            expect: Some(oid),
            md5: false,
            part_sizes: &[], // the sha256 is known: it is the check
        };
        // Fetched for a checkout: the work tree's copy reads it next.
        let opts = FetchOptions {
            read_soon: true,
            ..FetchOptions::default()
        };
        fetch_into_pool(pool, req, opts, report).await?;
        Ok(())
    }
}

/// The ETag of the object at `key`, which must be there with `size` bytes.
async fn resumable_etag(
    client: &S3Client,
    layout: &ObjectLayout,
    key: &str,
    oid: Oid,
    size: u64,
) -> Result<Option<String>, PointerFetchError> {
    let object = format!("s3://{}/{key}", layout.bucket);
    let meta = client
        .head(&layout.bucket, key)
        .await
        .map_err(PointerFetchError::Head)?;
    let Some(meta) = meta else {
        return Err(PointerFetchError::Missing { oid, object });
    };
    if meta.size != size {
        return Err(PointerFetchError::WrongSize {
            object,
            held: meta.size,
            size,
        });
    }
    Ok(meta.etag)
}
