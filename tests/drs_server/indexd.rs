//! The Gen3 Indexd subset drsd talks to: register a record (`POST /index/`,
//! Indexd's Basic credentials), a blank one (`POST /index/blank/`, as Fence
//! does when an upload begins: no size, hashes or URLs yet), read one (`GET
//! /index/{did}`, the `/` inside a did unencoded), add a version of one
//! (`POST /index/{did}`, a new did with the same `baseid`), find records by
//! hash, size or URL (`GET /index?...`). Validation follows Indexd 6: known
//! hash names with their hex patterns (a multipart `-N` ETag included), a
//! caller's did ending in a UUID (with or without a prefix), else
//! `dg.TEST/<uuid>`. The records are DRS objects too (see `render`).
//!
//! Lookups are as Indexd 6.3 makes them ([`find`]): one record at a time
//! (`GET /index/{did}`, DRS `GET /objects/{id}`) by its did or its `baseid`
//! (the newest version), else with the server's prefix added or taken
//! away; in bulk (DRS `POST /objects`) by the exact did only.
//!
//! Errors have Indexd's body, `{"error": "..."}`; its DRS routes answer
//! with DRS's (`reply.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Path, RawQuery, State as Extract};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth;
use super::render::rfc3339;
use super::reply::{Refusal, Reply};
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

/// The body of `POST /index/`.
#[derive(Debug, Clone, Deserialize)]
pub struct NewRecord {
    /// `object`, `container` or `multipart`.
    pub form: String,
    pub size: u64,
    /// Indexd's hash names (`md5`, `sha256`, `etag`, ...) to lower-case hex.
    pub hashes: BTreeMap<String, String>,
    #[serde(default)]
    pub urls: Vec<String>,
    #[serde(default)]
    pub file_name: Option<String>,
    #[serde(default)]
    pub authz: Vec<String>,
    #[serde(default)]
    pub acl: Vec<String>,
    /// Chosen by the caller (must end in a UUID), else made here.
    #[serde(default)]
    pub did: Option<String>,
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
    pub created: SystemTime,
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

    fn json(&self) -> Value {
        let created = rfc3339(self.created);
        let urls_metadata: serde_json::Map<String, Value> =
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
            "metadata": {},
            "version": null,
            "uploader": null,
            "created_date": created,
            "updated_date": created,
        })
    }
}

/// A random (version 4) UUID, hyphenated.
fn uuid4() -> String {
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

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    let lengths = [8, 4, 4, 4, 12];
    groups.len() == lengths.len()
        && groups
            .iter()
            .zip(lengths)
            .all(|(g, n)| g.len() == n && g.bytes().all(|c| c.is_ascii_hexdigit()))
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// Indexd's pattern for a hash of this name.
fn valid_hash(kind: &str, value: &str) -> bool {
    match kind {
        "md5" => is_lower_hex(value, 32),
        "sha1" => is_lower_hex(value, 40),
        "sha256" => is_lower_hex(value, 64),
        "sha512" => is_lower_hex(value, 128),
        "crc" => is_lower_hex(value, 8),
        "etag" => {
            let (md5, parts) = value.split_once('-').unwrap_or((value, "1"));
            is_lower_hex(md5, 32) && !parts.is_empty() && parts.bytes().all(|c| c.is_ascii_digit())
        }
        _ => false,
    }
}

/// Indexd's error: `{"error": msg}` with `status`.
fn error(status: StatusCode, msg: impl Into<String>) -> Refusal {
    Refusal::Indexd(status, msg.into())
}

/// A refusal of the shared checks (auth, a bad body), in Indexd's body.
fn as_indexd(refusal: Refusal) -> Refusal {
    match refusal {
        Refusal::Error(status, msg) => Refusal::Indexd(status, msg),
        other => other,
    }
}

fn validate(record: &NewRecord) -> Result<(), Refusal> {
    if !["object", "container", "multipart"].contains(&record.form.as_str()) {
        return Err(bad_request(format!("unknown form {:?}", record.form)));
    }
    if record.hashes.is_empty() {
        return Err(bad_request("hashes is empty"));
    }
    if let Some((kind, value)) = record.hashes.iter().find(|(k, v)| !valid_hash(k, v)) {
        return Err(bad_request(format!("hash {kind}: {value:?} is not valid")));
    }
    if let Some(did) = &record.did {
        let tail = did.rsplit('/').next().unwrap_or(did);
        if !is_uuid(tail) {
            return Err(bad_request(format!("did {did:?} does not end in a UUID")));
        }
    }
    Ok(())
}

fn bad_request(msg: impl Into<String>) -> Refusal {
    error(StatusCode::BAD_REQUEST, msg)
}

/// Validates and stores `new`; the stored record.
pub(crate) fn register(state: &mut State, new: NewRecord) -> Result<IndexRecord, Refusal> {
    validate(&new)?;
    let did = new.did.unwrap_or_else(|| format!("{PREFIX}/{}", uuid4()));
    let record = IndexRecord {
        did,
        baseid: uuid4(),
        rev: uuid4()[..8].to_string(),
        form: Some(new.form),
        size: Some(new.size),
        file_name: new.file_name,
        hashes: new.hashes,
        urls: new.urls,
        authz: new.authz,
        acl: new.acl,
        created: SystemTime::now(),
        serial: 0,
    };
    store(state, record)
}

/// Stores `record` under a did not yet taken.
fn store(state: &mut State, mut record: IndexRecord) -> Result<IndexRecord, Refusal> {
    if state.records.contains_key(&record.did) {
        let msg = format!("did {} exists", record.did);
        return Err(error(StatusCode::CONFLICT, msg));
    }
    record.serial = state.records.len() as u64;
    state.records.insert(record.did.clone(), record.clone());
    Ok(record)
}

/// A blank record, as `POST /index/blank/` makes one: a did of this
/// Indexd's form, no size, hashes or URLs, and `form` null.
pub(crate) fn register_blank(
    state: &mut State,
    file_name: Option<String>,
    authz: Vec<String>,
) -> Result<IndexRecord, Refusal> {
    let record = IndexRecord {
        did: format!("{PREFIX}/{}", uuid4()),
        baseid: uuid4(),
        rev: uuid4()[..8].to_string(),
        form: None,
        size: None,
        file_name,
        hashes: BTreeMap::new(),
        urls: Vec::new(),
        authz,
        acl: Vec::new(),
        created: SystemTime::now(),
        serial: 0,
    };
    store(state, record)
}

/// The body of `POST /index/blank/`.
#[derive(Debug, Deserialize)]
pub(crate) struct NewBlank {
    #[serde(default)]
    #[allow(dead_code)]
    uploader: Option<String>,
    #[serde(default)]
    file_name: Option<String>,
    #[serde(default)]
    authz: Vec<String>,
}

/// `POST /index/blank/` -> `{did, rev, baseid}`: an upload begun.
pub(crate) async fn create_blank(
    Extract(shared): Extract<Arc<Shared>>,
    headers: HeaderMap,
    body: Result<Json<NewBlank>, axum::extract::rejection::JsonRejection>,
) -> Reply {
    let mut state = shared.lock();
    state.counts.index_post += 1;
    up(&state)?;
    auth::check_indexd_write(&state, &headers).map_err(as_indexd)?;
    let Json(new) = body.map_err(|e| bad_request(e.body_text()))?;
    let record = register_blank(&mut state, new.file_name, new.authz)?;
    let answer = json!({ "did": record.did, "rev": record.rev, "baseid": record.baseid });
    Ok(Json(answer).into_response())
}

/// 503 while Indexd is set down.
fn up(state: &State) -> Result<(), Refusal> {
    if state.indexd_down {
        return Err(error(StatusCode::SERVICE_UNAVAILABLE, "Indexd is down"));
    }
    Ok(())
}

/// `POST /index/` -> `{did, rev, baseid}`.
pub(crate) async fn create(
    Extract(shared): Extract<Arc<Shared>>,
    headers: HeaderMap,
    body: Result<Json<NewRecord>, axum::extract::rejection::JsonRejection>,
) -> Reply {
    let mut state = shared.lock();
    state.counts.index_post += 1;
    up(&state)?;
    auth::check_indexd_write(&state, &headers).map_err(as_indexd)?;
    let Json(new) = body.map_err(|e| bad_request(e.body_text()))?;
    let record = register(&mut state, new)?;
    let answer = json!({ "did": record.did, "rev": record.rev, "baseid": record.baseid });
    Ok(Json(answer).into_response())
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
}

impl Filter {
    fn parse(query: &str) -> Result<Filter, Refusal> {
        let mut filter = Filter::default();
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
                _ => {}
            }
        }
        Ok(filter)
    }

    fn matches(&self, record: &IndexRecord) -> bool {
        self.size.is_none_or(|s| Some(s) == record.size)
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
    let records: Vec<Value> = state
        .records
        .values()
        .filter(|r| filter.matches(r))
        .map(IndexRecord::json)
        .collect();
    Ok(Json(json!({ "records": records })).into_response())
}

/// `POST /index/{did}` -> `{did, rev, baseid}`: a new version of the record
/// `did`, as Indexd 6 makes one: the body is a registration's (its
/// `form`, `size`, `hashes`, `urls`, ...), the new record gets a did of its
/// own (the caller's, if given) and the old one's `baseid`; no `rev` is
/// asked; the old version stays, found by its own hashes.
pub(crate) async fn add_version(
    Extract(shared): Extract<Arc<Shared>>,
    Path(did): Path<String>,
    headers: HeaderMap,
    body: Result<Json<NewRecord>, axum::extract::rejection::JsonRejection>,
) -> Reply {
    let mut state = shared.lock();
    state.counts.index_version += 1;
    up(&state)?;
    auth::check_indexd_write(&state, &headers).map_err(as_indexd)?;
    let Json(new) = body.map_err(|e| bad_request(e.body_text()))?;
    let baseid = state
        .records
        .get(&did)
        .map(|r| r.baseid.clone())
        .ok_or_else(|| error(StatusCode::NOT_FOUND, "no record found"))?;
    let mut record = register(&mut state, new)?;
    record.baseid = baseid;
    state.records.insert(record.did.clone(), record.clone());
    let answer = json!({ "did": record.did, "rev": record.rev, "baseid": record.baseid });
    Ok(Json(answer).into_response())
}
