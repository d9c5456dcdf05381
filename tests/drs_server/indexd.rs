//! The Gen3 Indexd subset drsd talks to, as Indexd 6.3 answers: register a
//! record (`POST /index/`), add a version of one (`POST /index/{did}`: a new
//! did, the same `baseid`), read one (`GET /index/{did}`, the `/` inside a
//! did unencoded), find records by hash, size or URL (`GET /index?...`).
//! Updates and blank records (`PUT /index/{did}?rev=`, `/index/blank/`) are
//! in `update`. Bodies are checked as Indexd's JSON schemas check them
//! (`schema`): no field outside the schema, `urls` required, known hash
//! names with their patterns (a multipart `-N` ETag included), a caller's
//! did or baseid ending in a UUID; without a did the server makes
//! `dg.TEST/<uuid>`, and a did that exists is 409 with Indexd's words.
//! The records are DRS objects too (see `render`).
//!
//! Lookups are as Indexd 6.3 makes them ([`find`]): one record at a time
//! (`GET /index/{did}`, DRS `GET /objects/{id}`) by its did or its `baseid`
//! (the newest version), else with the server's prefix added or taken
//! away; in bulk (DRS `POST /objects`) and for writes by the exact did only.
//!
//! Errors have Indexd's body, `{"error": "..."}`; its DRS routes answer
//! with DRS's (`reply.rs`). Writes want Indexd's own Basic login, or, once
//! a test says Arborist is configured, a bearer token this server's Fence
//! issued (`auth::check_indexd_write`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Path, RawQuery, State as Extract};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::auth;
use super::render::rfc3339;
use super::reply::{Refusal, Reply};
use super::schema;
use super::state::{Shared, State};

/// The prefix of the dids this Indexd makes (Indexd's `DEFAULT_PREFIX`
/// without its `/`).
pub(crate) const PREFIX: &str = "dg.TEST";

/// The record `id` names, as Indexd's single lookup finds it: its did, or
/// a `baseid` (the newest version of it), else the same with `PREFIX/`
/// added (an id without it) or taken away (an id with it).
pub(crate) fn find<'a>(state: &'a State, id: &str) -> Option<&'a IndexRecord> {
    let by = |id: &str| {
        state.records.get(id).or_else(|| {
            state
                .records
                .values()
                .filter(|r| r.baseid == id)
                .max_by_key(|r| (r.created, r.serial))
        })
    };
    let prefix = format!("{PREFIX}/");
    by(id).or_else(|| match id.strip_prefix(&prefix) {
        Some(bare) => by(bare),
        None => by(&format!("{prefix}{id}")),
    })
}

/// What a test registers (the core of `POST /index/`'s body; the HTTP
/// route takes Indexd's other fields too, see [`PostBody`]).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct NewRecord {
    /// `object`, `container` or `multipart`.
    pub form: String,
    pub size: u64,
    /// Indexd's hash names (`md5`, `sha256`, `etag`, ...) to lower-case hex.
    pub hashes: BTreeMap<String, String>,
    /// Required, as by Indexd (possibly empty).
    pub urls: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_name: Option<String>,
    #[serde(default)]
    pub authz: Vec<String>,
    #[serde(default)]
    pub acl: Vec<String>,
    /// Chosen by the caller (must end in a UUID), else made here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub did: Option<String>,
}

/// The body of `POST /index/` and `POST /index/{did}` once it passed
/// [`schema::check_post`]: the record and Indexd's optional fields.
#[derive(Debug, Deserialize)]
pub(crate) struct PostBody {
    #[serde(flatten)]
    record: NewRecord,
    #[serde(default)]
    baseid: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    metadata: Map<String, Value>,
    #[serde(default)]
    uploader: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

impl PostBody {
    /// `body` checked as Indexd's schema checks it, then read.
    fn read(body: Value) -> Result<PostBody, Refusal> {
        schema::check_post(&body).map_err(bad_request)?;
        serde_json::from_value(body).map_err(|e| bad_request(e.to_string()))
    }
}

/// A registered record.
#[derive(Debug, Clone)]
pub(crate) struct IndexRecord {
    pub did: String,
    pub baseid: String,
    pub rev: String,
    /// `None` for a blank record, as its `size`.
    pub form: Option<String>,
    pub size: Option<u64>,
    pub file_name: Option<String>,
    pub hashes: BTreeMap<String, String>,
    pub urls: Vec<String>,
    pub authz: Vec<String>,
    pub acl: Vec<String>,
    pub version: Option<String>,
    pub metadata: Map<String, Value>,
    pub uploader: Option<String>,
    pub description: Option<String>,
    pub created: SystemTime,
    pub updated: SystemTime,
    /// Order of creation, for versions made within one clock tick.
    pub serial: u64,
}

impl IndexRecord {
    /// `drs://PREFIX:UUID` for a did of this Indexd's form, as Indexd has
    /// it; a did without a prefix is its own compact id.
    pub(crate) fn self_uri(&self) -> String {
        match self.did.split_once('/') {
            Some((prefix, rest)) => format!("drs://{prefix}:{rest}"),
            None => format!("drs://{PREFIX}:{}", self.did),
        }
    }

    /// Whether Indexd takes it as blank (`PUT /index/blank/` may fill
    /// it): no size (or 0) and no hashes.
    pub(crate) fn is_blank(&self) -> bool {
        self.size.unwrap_or(0) == 0 && self.hashes.is_empty()
    }

    pub(crate) fn json(&self) -> Value {
        let urls_metadata: Map<String, Value> =
            self.urls.iter().map(|u| (u.clone(), json!({}))).collect();
        json!({
            "did": self.did,
            "baseid": self.baseid,
            "rev": self.rev,
            "form": self.form,
            "size": self.size,
            "file_name": self.file_name,
            "hashes": self.hashes,
            "urls": self.urls,
            "urls_metadata": urls_metadata,
            "authz": self.authz,
            "acl": self.acl,
            "metadata": self.metadata,
            "version": self.version,
            "uploader": self.uploader,
            "description": self.description,
            "created_date": rfc3339(self.created),
            "updated_date": rfc3339(self.updated),
        })
    }
}

/// A random (version 4) UUID, hyphenated.
pub(crate) fn uuid4() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Indexd's error: `{"error": msg}` with `status`.
pub(crate) fn error(status: StatusCode, msg: impl Into<String>) -> Refusal {
    Refusal::Indexd(status, msg.into())
}

/// A refusal of the shared checks (auth, a bad body), in Indexd's body.
pub(crate) fn as_indexd(refusal: Refusal) -> Refusal {
    match refusal {
        Refusal::Error(status, msg) => Refusal::Indexd(status, msg),
        other => other,
    }
}

pub(crate) fn bad_request(msg: impl Into<String>) -> Refusal {
    error(StatusCode::BAD_REQUEST, msg)
}

/// Checks `new` as `POST /index/` would and stores it; the stored record,
/// or Indexd's refusal.
pub(crate) fn register(state: &mut State, new: NewRecord) -> Result<IndexRecord, Refusal> {
    let body = serde_json::to_value(&new).map_err(|e| bad_request(e.to_string()))?;
    let body = PostBody::read(body)?;
    store(state, record_of(body, None))
}

/// A new record of `body`, with `baseid` (a version's) or the body's, or a
/// fresh one.
fn record_of(body: PostBody, baseid: Option<String>) -> IndexRecord {
    let new = body.record;
    let now = SystemTime::now();
    IndexRecord {
        did: new.did.unwrap_or_else(|| format!("{PREFIX}/{}", uuid4())),
        baseid: baseid.or(body.baseid).unwrap_or_else(uuid4),
        rev: new_rev(),
        form: Some(new.form),
        size: Some(new.size),
        file_name: new.file_name,
        hashes: new.hashes,
        urls: new.urls,
        authz: new.authz,
        acl: new.acl,
        version: body.version,
        metadata: body.metadata,
        uploader: body.uploader,
        description: body.description,
        created: now,
        updated: now,
        serial: 0,
    }
}

/// Every write gives a record a new 8-hex `rev`.
pub(crate) fn new_rev() -> String {
    uuid4()[..8].to_string()
}

/// Stores `record` under a did not yet taken (409 with Indexd's words).
pub(crate) fn store(state: &mut State, mut record: IndexRecord) -> Result<IndexRecord, Refusal> {
    if state.records.contains_key(&record.did) {
        let msg = format!("did \"{}\" already exists", record.did);
        return Err(error(StatusCode::CONFLICT, msg));
    }
    record.serial = state.records.len() as u64;
    state.records.insert(record.did.clone(), record.clone());
    Ok(record)
}

/// 503 while Indexd is set down.
pub(crate) fn up(state: &State) -> Result<(), Refusal> {
    if state.indexd_down {
        return Err(error(StatusCode::SERVICE_UNAVAILABLE, "Indexd is down"));
    }
    Ok(())
}

/// A JSON body, or Indexd's 400.
pub(crate) type Body = Result<Json<Value>, axum::extract::rejection::JsonRejection>;

/// The JSON of `body`, or 400.
pub(crate) fn json_body(body: Body) -> Result<Value, Refusal> {
    body.map(|Json(v)| v)
        .map_err(|e| bad_request(e.body_text()))
}

/// `{did, rev, baseid}`, what every write answers.
pub(crate) fn ids(record: &IndexRecord) -> Value {
    json!({ "did": record.did, "rev": record.rev, "baseid": record.baseid })
}

/// `POST /index/` -> `{did, rev, baseid}`: the body checked as Indexd's
/// schema checks it (400), then the caller (403), then the did (409 when
/// taken).
pub(crate) async fn create(
    Extract(shared): Extract<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let gate = shared.lock().registration_gate.clone();
    if let Some(gate) = gate {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(30), gate.wait()).await;
    }
    let mut state = shared.lock();
    state.counts.index_post += 1;
    up(&state)?;
    let body = PostBody::read(json_body(body)?)?;
    auth::check_indexd_create(&state, &headers).map_err(as_indexd)?;
    let record = store(&mut state, record_of(body, None))?;
    Ok(Json(ids(&record)).into_response())
}

/// `GET /index/{did}`: as Indexd's single lookup finds it ([`find`]).
pub(crate) async fn read(Extract(shared): Extract<Arc<Shared>>, Path(did): Path<String>) -> Reply {
    let mut state = shared.lock();
    state.counts.index_get += 1;
    up(&state)?;
    let record =
        find(&state, &did).ok_or_else(|| error(StatusCode::NOT_FOUND, "no record found"))?;
    Ok(Json(record.json()).into_response())
}

/// The conditions of a query: every `hash=kind:hex`, `size=` and `url=`
/// must hold.
#[derive(Default)]
struct Filter {
    hashes: Vec<(String, String)>,
    size: Option<u64>,
    urls: Vec<String>,
    /// Only records whose did sorts after this one (Indexd pages by did).
    start: Option<String>,
    /// Records answered at most: Indexd's `limit`, 100 unless asked,
    /// 1024 at most.
    limit: usize,
}

impl Filter {
    fn parse(query: &str) -> Result<Filter, Refusal> {
        let mut filter = Filter {
            limit: 100,
            ..Filter::default()
        };
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            match &*key {
                "hash" => {
                    let (kind, hex) = value
                        .split_once(':')
                        .ok_or_else(|| bad_request(format!("hash {value:?} is not kind:value")))?;
                    filter.hashes.push((kind.to_string(), hex.to_string()));
                }
                "size" => {
                    let size = value
                        .parse()
                        .map_err(|_| bad_request("size is not a number"))?;
                    filter.size = Some(size);
                }
                "url" => filter.urls.push(value.into_owned()),
                "start" => filter.start = Some(value.into_owned()),
                "limit" => match value.parse::<usize>() {
                    Ok(n) if n <= 1024 => filter.limit = n,
                    _ => return Err(bad_request("limit must be between 0 and 1024")),
                },
                _ => {}
            }
        }
        Ok(filter)
    }

    fn matches(&self, record: &IndexRecord) -> bool {
        self.start.as_ref().is_none_or(|s| record.did > *s)
            && self.size.is_none_or(|s| Some(s) == record.size)
            && self
                .hashes
                .iter()
                .all(|(k, v)| record.hashes.get(k) == Some(v))
            && self.urls.iter().all(|u| record.urls.contains(u))
    }
}

/// `GET /index?hash=sha256:HEX&size=N` -> `{records: [...]}`.
pub(crate) async fn query(
    Extract(shared): Extract<Arc<Shared>>,
    RawQuery(query): RawQuery,
) -> Reply {
    let mut state = shared.lock();
    state.counts.index_by_hash += 1;
    up(&state)?;
    let filter = Filter::parse(query.as_deref().unwrap_or(""))?;
    if filter.hashes.iter().any(|(kind, _)| kind == "md5") {
        state.counts.index_by_md5 += 1;
    }
    let records: Vec<Value> = state
        .records
        .values()
        .filter(|r| filter.matches(r))
        .take(filter.limit)
        .map(IndexRecord::json)
        .collect();
    Ok(Json(json!({ "records": records })).into_response())
}

/// `POST /index/{did}` -> `{did, rev, baseid}`: a new version of the record
/// `did` (its exact did), as Indexd 6 makes one: the body is a
/// registration's, the new record gets a did of its own (the caller's, if
/// given: 409 when taken) and the old one's `baseid`; no `rev` is asked;
/// the old version stays, found by its own hashes.
pub(crate) async fn add_version(
    Extract(shared): Extract<Arc<Shared>>,
    Path(did): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let mut state = shared.lock();
    state.counts.index_version += 1;
    up(&state)?;
    let body = PostBody::read(json_body(body)?)?;
    let baseid = state
        .records
        .get(&did)
        .map(|r| r.baseid.clone())
        .ok_or_else(|| error(StatusCode::NOT_FOUND, "no record found"))?;
    auth::check_indexd_write(&state, &headers).map_err(as_indexd)?;
    let mut record = record_of(body, Some(baseid));
    if state.records.contains_key(&record.did) {
        let msg = format!("{} already exists", record.did);
        return Err(error(StatusCode::CONFLICT, msg));
    }
    record = store(&mut state, record)?;
    Ok(Json(ids(&record)).into_response())
}
