//! The server's one shared state behind one lock: objects, Indexd records,
//! credentials, deferrals and counts. Handlers hold the lock only to read or
//! change it, never across an await, so a test's set-up call and the
//! server's thread never wait on each other for long.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use md5::Md5;
use sha2::Digest;

use super::bucket::Bucket;
use super::indexd::IndexRecord;
use super::spec::{AccessSpec, Auth, Content, Counts, Endpoint, ObjectSpec, Times};

/// What the handlers share: the fixed facts and the locked state.
pub(crate) struct Shared {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub base_url: String,
    /// Keys the URL signatures and the tokens' JWT signatures.
    pub secret: [u8; 32],
    /// The commons' bucket in a real store, when it is not the server's own.
    pub s3: Option<super::s3_bucket::S3Bucket>,
    state: Mutex<State>,
}

impl Shared {
    pub(crate) fn new(base_url: String, s3: Option<super::s3_bucket::S3Bucket>) -> Arc<Shared> {
        Arc::new(Shared {
            base_url,
            secret: rand::random(),
            s3,
            state: Mutex::new(State::default()),
        })
    }

    /// The state; a handler that panicked holding it left nothing half
    /// changed that matters to a test server, so poison is ignored.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A blob held by the server.
pub(crate) struct Blob {
    pub name: Option<String>,
    /// None for a metadata-only object.
    pub bytes: Option<Arc<[u8]>>,
    pub size: u64,
    pub checksums: Vec<(String, String)>,
    pub access: Vec<AccessSpec>,
    /// The data endpoint's ETag (unquoted): the md5 of the bytes, as a
    /// single-part S3 upload has it.
    pub etag: Option<String>,
    pub created: SystemTime,
}

/// A bundle: other objects by id, with the names they take in it.
pub(crate) struct Bundle {
    pub name: Option<String>,
    pub contents: Vec<(String, String)>,
    pub created: SystemTime,
}

pub(crate) enum Entry {
    Blob(Blob),
    Bundle(Bundle),
}

/// A bearer token the server accepts until it expires or is revoked.
pub(crate) struct Token {
    pub expires: Option<SystemTime>,
    pub revoked: bool,
    /// Who it was issued to (the API key's id): the uploader of the blank
    /// records Fence makes for it.
    pub subject: String,
}

struct Deferral {
    left: Times,
    retry_after: u64,
}

/// Everything a test can change while the server runs.
pub(crate) struct State {
    pub objects: BTreeMap<String, Entry>,
    pub records: BTreeMap<String, IndexRecord>,
    pub auth: Auth,
    pub tokens: HashMap<String, Token>,
    /// Gen3 API keys the token endpoint takes: key_id -> api_key.
    pub api_keys: HashMap<String, String>,
    pub token_ttl: Duration,
    /// The user and password Indexd's writes want.
    pub indexd_login: (String, String),
    pub indexd_down: bool,
    /// Whether Indexd checks bearer tokens with Arborist (a commons), which
    /// takes this server's Fence tokens; else it has no Arborist.
    pub arborist: bool,
    /// Fence's upload and multipart init ignore a guid and make a blank
    /// record, as Fence before 10.2.0 did.
    pub fence_before_10_2: bool,
    /// Fence's multipart complete hands the store every part but the last
    /// and answers OK: a store that dropped a part.
    pub complete_drops_last_part: bool,
    /// How long a multipart complete takes (`set_complete_takes`).
    pub complete_takes: Duration,
    /// Arborist gives Fence tokens no `create`: `POST /index/` is 403.
    pub create_denied: bool,
    /// `POST /index/` waits at this barrier (30 s at most) before it is
    /// served: that many registrations are then under way at once.
    pub registration_gate: Option<Arc<tokio::sync::Barrier>>,
    /// Fence's `MAX_PRESIGNED_URL_TTL`: the lifetime of the URLs it signs,
    /// and the most a caller's `expires_in` may ask.
    pub signed_url_ttl: Duration,
    /// The commons' upload bucket (`bucket`).
    pub bucket: Bucket,
    /// `maxBulkRequestLength`, or None when bulk requests are off.
    pub bulk_max: Option<usize>,
    /// Whether `POST /objects/access` (DRS 1.4 bulk access URLs) is
    /// served; off, it answers 404, as Indexd and Fence do.
    pub bulk_access: bool,
    /// Added to every answer: a server across a network, for benchmarks.
    pub latency: Duration,
    deferrals: HashMap<(Endpoint, String), Deferral>,
    pub counts: Counts,
}

impl Default for State {
    fn default() -> State {
        State {
            objects: BTreeMap::new(),
            records: BTreeMap::new(),
            auth: Auth::None,
            tokens: HashMap::new(),
            api_keys: HashMap::new(),
            token_ttl: Duration::from_secs(3600),
            indexd_login: ("indexd".into(), "indexd-password".into()),
            indexd_down: false,
            arborist: false,
            fence_before_10_2: false,
            complete_drops_last_part: false,
            complete_takes: Duration::ZERO,
            create_denied: false,
            registration_gate: None,
            signed_url_ttl: Duration::from_secs(3600),
            bucket: Bucket::default(),
            bulk_max: Some(100),
            bulk_access: true,
            latency: Duration::ZERO,
            deferrals: HashMap::new(),
            counts: Counts::default(),
        }
    }
}

impl State {
    /// Holds `spec`, replacing any object of the same id.
    pub(crate) fn add_object(&mut self, spec: ObjectSpec) {
        let (bytes, size, etag) = match spec.content {
            Content::Bytes(bytes) => {
                let etag = hex::encode(Md5::digest(&bytes));
                let size = bytes.len() as u64;
                (Some(Arc::from(bytes)), size, Some(etag))
            }
            Content::Size(size) => (None, size, None),
        };
        let blob = Blob {
            name: spec.name,
            bytes,
            size,
            checksums: spec.checksums,
            access: spec.access,
            etag,
            created: SystemTime::now(),
        };
        self.objects.insert(spec.id, Entry::Blob(blob));
    }

    /// Answers 202 for `id` on `endpoint` for `times` answers.
    pub(crate) fn defer(&mut self, endpoint: Endpoint, id: &str, times: Times, retry_after: u64) {
        let deferral = Deferral {
            left: times,
            retry_after,
        };
        self.deferrals.insert((endpoint, id.to_string()), deferral);
    }

    /// The `Retry-After` seconds when this request is to be deferred; one
    /// answer of its deferral is used up.
    pub(crate) fn take_deferral(&mut self, endpoint: Endpoint, id: &str) -> Option<u64> {
        let key = (endpoint, id.to_string());
        let deferral = self.deferrals.get_mut(&key)?;
        let retry_after = deferral.retry_after;
        match &mut deferral.left {
            Times::Forever => return Some(retry_after),
            Times::Next(0) => {}
            Times::Next(n) => {
                *n -= 1;
                return Some(retry_after);
            }
        }
        self.deferrals.remove(&key);
        None
    }
}
