//! A GA4GH DRS server (1.2, with 1.3's `OPTIONS` and 1.4's bulk requests)
//! with a Gen3 commons behind it, Indexd and Fence as they answer (read
//! from uc-cdis/indexd 6.4.0, commit eab0270d, and uc-cdis/fence 13.3.0,
//! commit d03fe036, and tried against a real Indexd; 6.4.0 changed from
//! 6.3.0 only the order of an object's `supported_types` in
//! `indexd/drs/blueprint.py`, BearerAuth first by default, which the
//! single type answered here already follows), run in the test process so a test states the objects, the
//! credentials and the misbehaviour (202s, expiry, an Indexd that is down)
//! it needs, and reads back what the client asked. Real Indexd and Fence
//! are not installable from a package registry; this stand-in is held to
//! the GA4GH compliance suite by `tests/ci/drs-compliance.sh` (through the
//! `drs-test-server` binary) and to Indexd's and Fence's answers by
//! `tests/e2e/gen3_server.rs`.
//!
//! The URLs Fence signs point at this server's own upload bucket
//! (`/s3/commons-upload/...`, bytes in memory), not at the tests' Ceph
//! RGW: the `drs-test-server` binary runs without RGW (the compliance run),
//! the tests' crates have no S3 signer (only the daemon has one, and
//! depending on its internals would tie the test server to code being
//! restructured), and a bucket of its own lets a test set the URLs'
//! lifetime to a second and see the expiry as S3 answers it (403
//! `Request has expired`) without waiting on RGW's clock. What a client
//! does with such a URL (PUT, parts, GET) is what it does with S3's.
//!
//! The server runs on a thread of its own with its own tokio runtime, so the
//! sync tests (and their current-thread runtimes) never have to drive it.
//! Routes, under `base_url()`:
//!
//! - `/ga4gh/drs/v1/service-info`, `/ga4gh/drs/v1/objects` (bulk POST),
//!   `/ga4gh/drs/v1/objects/{id}` (GET, OPTIONS),
//!   `/ga4gh/drs/v1/objects/{id}/access/{access_id}` and
//!   `/ga4gh/drs/v1/objects/access` (bulk POST): `drs`;
//! - `/data/{id}`, the bytes (GET, HEAD, one `Range`): `data`;
//! - `/index/` (POST), `/index/{did}` (GET; POST adds a version),
//!   `/index?hash=`: `indexd`; `PUT /index/{did}?rev=`, `/index/blank/`
//!   (POST) and `PUT /index/blank/{did}?rev=`: `update`; the bodies
//!   checked as Indexd's JSON schemas: `schema`;
//! - `/user/credentials/api/access_token`: `auth`;
//! - `/user/data/upload` (POST), `/user/data/upload/{guid}` (GET),
//!   `/user/data/multipart/{init,upload,complete}` (POST),
//!   `/user/data/download/{guid}` (GET), and the DRS access route of an
//!   Indexd record: `fence`;
//! - `/s3/commons-upload/{key}` (GET, HEAD, PUT through signed URLs only):
//!   `bucket`.

mod auth;
mod bucket;
mod data;
mod drs;
mod fence;
mod indexd;
mod render;
mod reply;
mod s3_bucket;
mod schema;
mod spec;
mod state;
mod update;

use std::net::TcpListener;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};
use axum::serve::ListenerExt;
use axum::Router;
use tokio::sync::oneshot;

pub use bucket::UPLOAD_BUCKET;
pub use indexd::NewRecord;
pub use s3_bucket::S3Target;
pub use spec::{AccessSpec, Auth, Content, Counts, Endpoint, ObjectSpec, Times};

use state::{Bundle, Entry, Shared, Token};

/// The path DRS is served under.
pub const DRS_PATH: &str = "/ga4gh/drs/v1";

/// A running server; stops when dropped.
pub struct DrsServer {
    shared: Arc<Shared>,
    port: u16,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl DrsServer {
    /// Serves on a free loopback port.
    pub fn start() -> DrsServer {
        DrsServer::start_on(0).expect("bind a loopback port for the DRS server")
    }

    /// Serves on `127.0.0.1:port` (0: any free port).
    pub fn start_on(port: u16) -> std::io::Result<DrsServer> {
        DrsServer::serve_on(port, None)
    }

    /// Serves on a free loopback port, Fence signing into the bucket of a
    /// real S3 store (`s3_bucket.rs`) rather than the server's own; the
    /// bucket counts nothing then.
    pub fn start_on_s3(target: &S3Target) -> DrsServer {
        DrsServer::serve_on(0, Some(s3_bucket::S3Bucket::new(target)))
            .expect("bind a loopback port for the DRS server")
    }

    fn serve_on(port: u16, s3: Option<s3_bucket::S3Bucket>) -> std::io::Result<DrsServer> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let shared = Shared::new(format!("http://127.0.0.1:{port}"), s3);
        let app = router(shared.clone());
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("drs-test-server".into())
            .spawn(move || serve(listener, app, stopped))?;
        Ok(DrsServer {
            shared,
            port,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.shared.base_url
    }

    /// `http://127.0.0.1:PORT/ga4gh/drs/v1`.
    pub fn drs_url(&self) -> String {
        format!("{}{DRS_PATH}", self.shared.base_url)
    }

    /// The unsigned URL of an object's bytes on this server.
    pub fn data_url(&self, id: &str) -> String {
        render::data_url(&self.shared.base_url, id)
    }

    /// Serves `spec`, replacing an object of the same id.
    pub fn add_object(&self, spec: ObjectSpec) {
        self.shared.lock().add_object(spec);
    }

    /// Serves a bundle of the objects `contents` names, as `(name, id)`.
    pub fn add_bundle(&self, id: &str, name: Option<&str>, contents: &[(&str, &str)]) {
        let bundle = Bundle {
            name: name.map(str::to_string),
            contents: contents
                .iter()
                .map(|(name, id)| (name.to_string(), id.to_string()))
                .collect(),
            created: SystemTime::now(),
        };
        let mut state = self.shared.lock();
        state.objects.insert(id.to_string(), Entry::Bundle(bundle));
    }

    /// Forgets an object: its id answers 404 from now on.
    pub fn remove_object(&self, id: &str) {
        self.shared.lock().objects.remove(id);
    }

    /// What the DRS endpoints ask of callers from now on.
    pub fn set_auth(&self, auth: Auth) {
        self.shared.lock().auth = auth;
    }

    /// Accepts `token` as a bearer token until it is revoked or expired.
    pub fn add_token(&self, token: &str) {
        let token_state = Token {
            expires: None,
            revoked: false,
            subject: "test-user".into(),
        };
        self.shared.lock().tokens.insert(token.into(), token_state);
    }

    /// Refuses `token` from now on (401, as for an expired one).
    pub fn revoke_token(&self, token: &str) {
        if let Some(t) = self.shared.lock().tokens.get_mut(token) {
            t.revoked = true;
        }
    }

    /// Makes every token known so far expired, as if their time had run out.
    pub fn expire_tokens(&self) {
        let now = SystemTime::now();
        for token in self.shared.lock().tokens.values_mut() {
            token.expires = Some(now);
        }
    }

    /// Lets the token endpoint take this Gen3 API key.
    pub fn set_api_key(&self, key_id: &str, api_key: &str) {
        let mut state = self.shared.lock();
        state.api_keys.insert(key_id.into(), api_key.into());
    }

    /// A new Gen3 API key for `key_id`, made as Fence makes one (a JWT
    /// whose `iss` is this server's `/user`, valid for 30 days), which the
    /// token endpoint takes from now on.
    pub fn make_api_key(&self, key_id: &str) -> String {
        let expires = SystemTime::now() + Duration::from_secs(30 * 24 * 3600);
        let key = auth::api_key(&self.shared.secret, &self.shared.base_url, key_id, expires);
        self.set_api_key(key_id, &key);
        key
    }

    /// How long the tokens issued from now on last (default an hour).
    pub fn set_token_ttl(&self, ttl: Duration) {
        self.shared.lock().token_ttl = ttl;
    }

    /// The user and password Indexd's writes want.
    pub fn indexd_login(&self) -> (String, String) {
        self.shared.lock().indexd_login.clone()
    }

    pub fn set_indexd_login(&self, user: &str, password: &str) {
        self.shared.lock().indexd_login = (user.into(), password.into());
    }

    /// Down: every `/index` request answers 503.
    pub fn set_indexd_down(&self, down: bool) {
        self.shared.lock().indexd_down = down;
    }

    /// Registers an Indexd record as `POST /index/` would; its did, or why
    /// Indexd would refuse it.
    pub fn add_record(&self, record: NewRecord) -> Result<String, String> {
        let mut state = self.shared.lock();
        indexd::register(&mut state, record)
            .map(|r| r.did)
            .map_err(|refusal| refusal.to_string())
    }

    /// A blank record, as `POST /index/blank/` makes one when an upload
    /// begins through Fence: its did (`dg.TEST/<uuid>`); no size, hashes
    /// or URLs.
    pub fn add_blank_record(&self, file_name: &str) -> String {
        let mut state = self.shared.lock();
        update::register_blank(&mut state, None, Some(file_name.into()), Vec::new())
            .expect("a fresh did")
            .did
    }

    /// The dids of the blank records (uploads begun through Fence and not
    /// completed).
    pub fn blank_records(&self) -> Vec<String> {
        let state = self.shared.lock();
        let blank = state.records.values().filter(|r| r.size.is_none());
        blank.map(|r| r.did.clone()).collect()
    }

    /// A commons' Indexd: Arborist is configured, so Indexd's writes take a
    /// bearer token this server's Fence issued (besides Indexd's Basic
    /// login). Off by default: Indexd then answers a bearer token with
    /// `Arborist is not configured`.
    pub fn set_arborist(&self, on: bool) {
        self.shared.lock().arborist = on;
    }

    /// Whether Fence behaves as before 10.2.0: its upload and multipart
    /// init ignore a guid and make a blank record (default: 13.3.0's, a
    /// guid must name a record Indexd holds, else 404).
    pub fn set_fence_before_10_2(&self, on: bool) {
        self.shared.lock().fence_before_10_2 = on;
    }

    /// Whether Arborist denies Fence tokens `create` on records: `POST
    /// /index/` is 403, while uploads through Fence and the blank records
    /// they make (`file_upload`) still work.
    pub fn set_create_denied(&self, on: bool) {
        self.shared.lock().create_denied = on;
    }

    /// Whether Fence's multipart complete answers OK having handed the
    /// store every part but the last (a store, or a Fence, that loses a
    /// part and says nothing).
    pub fn set_complete_drops_last_part(&self, on: bool) {
        self.shared.lock().complete_drops_last_part = on;
    }

    /// How long Fence's multipart complete takes before it answers, as a
    /// store assembling a large object keeps S3's CompleteMultipartUpload
    /// (and Fence, which waits for it) from answering at once.
    pub fn set_complete_takes(&self, took: Duration) {
        self.shared.lock().complete_takes = took;
    }

    /// Each `POST /index/` from now on is served only once `n` are waiting
    /// (or after 30 s): `n` clients registering records at once, whatever
    /// the order they got there in. `0` serves them as they come.
    pub fn gather_registrations(&self, n: usize) {
        self.shared.lock().registration_gate =
            (n > 0).then(|| Arc::new(tokio::sync::Barrier::new(n)));
    }

    /// Fence's `MAX_PRESIGNED_URL_TTL`: how long the URLs it signs from now
    /// on last (default an hour; at least a second), and the most a
    /// caller's `expires_in` gets.
    pub fn set_signed_url_ttl(&self, ttl: Duration) {
        self.shared.lock().signed_url_ttl = ttl;
    }

    /// Puts `bytes` at `key` in the upload bucket, as if uploaded; the
    /// location an Indexd record names it by, `s3://commons-upload/KEY`.
    pub fn put_in_bucket(&self, key: &str, bytes: Vec<u8>) -> String {
        let mut state = self.shared.lock();
        let stored = bucket::Stored::new(bytes);
        state.bucket.objects.insert(key.to_string(), stored);
        bucket::location(key)
    }

    /// The bytes at `key` in the upload bucket and their ETag (unquoted).
    pub fn bucket_object(&self, key: &str) -> Option<(Vec<u8>, String)> {
        let state = self.shared.lock();
        let stored = state.bucket.objects.get(key)?;
        Some((stored.bytes.to_vec(), stored.etag.clone()))
    }

    /// Multipart uploads begun in the upload bucket and neither completed
    /// nor aborted (their parts stay until the store's lifecycle removes
    /// them), with how many parts each holds.
    pub fn open_uploads(&self) -> Vec<usize> {
        let state = self.shared.lock();
        state
            .bucket
            .uploads
            .values()
            .map(|u| u.parts.len())
            .collect()
    }

    /// `maxBulkRequestLength` (default 100), declared in service-info but,
    /// as by Indexd, never enforced; or None to answer bulk requests 404 as
    /// a server without them.
    pub fn set_bulk_limit(&self, max: Option<usize>) {
        self.shared.lock().bulk_max = max;
    }

    /// Serves `POST /objects/access` (DRS 1.4 bulk access URLs; on by
    /// default), or, off, answers it 404 as Indexd and Fence do.
    pub fn set_bulk_access(&self, on: bool) {
        self.shared.lock().bulk_access = on;
    }

    /// Answers `202 Accepted` with `Retry-After: retry_after` to requests
    /// for `id` on `endpoint`, `times` times.
    pub fn defer(&self, endpoint: Endpoint, id: &str, times: Times, retry_after: u64) {
        self.shared.lock().defer(endpoint, id, times, retry_after);
    }

    /// Delays every answer by `latency`, as a server across a network
    /// would (benchmarks compare round trips this way).
    pub fn set_latency(&self, latency: Duration) {
        self.shared.lock().latency = latency;
    }

    /// Requests seen so far per endpoint and the bytes served.
    pub fn counts(&self) -> Counts {
        self.shared.lock().counts
    }

    pub fn reset_counts(&self) {
        self.shared.lock().counts = Counts::default();
    }
}

impl Drop for DrsServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(&format!("{DRS_PATH}/service-info"), get(drs::service_info))
        .route(&format!("{DRS_PATH}/objects"), post(drs::bulk))
        // Before the wildcard: `access` as an object id still reads.
        .route(
            &format!("{DRS_PATH}/objects/access"),
            post(drs::bulk_access)
                .get(drs::object_or_access)
                .options(drs::options),
        )
        .route(
            &format!("{DRS_PATH}/objects/{{*rest}}"),
            get(drs::object_or_access).options(drs::options),
        )
        .route("/data/{*id}", get(data::serve))
        .route("/index", get(indexd::query))
        .route("/index/", get(indexd::query).post(indexd::create))
        .route("/index/blank/", post(update::create_blank))
        .route("/index/blank/{*did}", put(update::complete_blank))
        .route(
            "/index/{*did}",
            get(indexd::read)
                .post(indexd::add_version)
                .put(update::update),
        )
        // The same Indexd where a commons mounts it, under `/index`
        // (`drsctl init --gen3`: `https://commons/index/index?hash=`).
        .route("/index/index", get(indexd::query))
        .route("/index/index/", get(indexd::query).post(indexd::create))
        .route("/index/index/blank/", post(update::create_blank))
        .route("/index/index/blank/{*did}", put(update::complete_blank))
        .route(
            "/index/index/{*did}",
            get(indexd::read)
                .post(indexd::add_version)
                .put(update::update),
        )
        .route(
            "/user/credentials/api/access_token",
            post(auth::access_token),
        )
        .route("/user/data/upload", post(fence::upload))
        .route("/user/data/upload/{*guid}", get(fence::upload_url))
        .route("/user/data/multipart/init", post(fence::multipart_init))
        .route("/user/data/multipart/upload", post(fence::multipart_part))
        .route(
            "/user/data/multipart/complete",
            post(fence::multipart_complete),
        )
        .route("/user/data/download/{*guid}", get(fence::download))
        .route(
            "/s3/{*path}",
            get(bucket::serve)
                .put(bucket::serve)
                .layer(DefaultBodyLimit::disable()),
        )
        .layer(axum::middleware::from_fn_with_state(shared.clone(), delay))
        .with_state(shared)
}

/// The latency a test asked for, before each answer.
async fn delay(
    axum::extract::State(shared): axum::extract::State<Arc<Shared>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let latency = shared.lock().latency;
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    next.run(request).await
}

/// Runs the server until `stop` fires or its sender is dropped; connections
/// still open are dropped with the runtime.
fn serve(listener: TcpListener, app: Router, stop: oneshot::Receiver<()>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime for the DRS server");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)
            .expect("a tokio listener for the DRS server");
        // Without it a kept connection's next answer can wait ~40 ms (Nagle
        // against delayed ACK), as README says of RGW.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::select! {
            served = axum::serve(listener, app) => {
                if let Err(e) = served {
                    eprintln!("drs test server stopped: {e}");
                }
            }
            _ = stop => {}
        }
    });
}
