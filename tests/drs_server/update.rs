//! Indexd's changes to records that exist, and its blank records, as
//! Indexd 6.3 makes them:
//!
//! - `PUT /index/{did}?rev=R`: urls, acl, authz, file_name, version,
//!   uploader, metadata, description (the body checked as
//!   `PUT_RECORD_SCHEMA`: `size` or `hashes` in it is a 400, so neither ever
//!   changes); a `rev` that is not the record's (stale or missing) is 409
//!   `revision mismatch`;
//! - `POST /index/blank/` (201): a record with no size, hashes or URLs and
//!   `form` null, as Fence makes one when an upload begins;
//! - `PUT /index/blank/{did}?rev=R`: fills a blank record's size, hashes,
//!   urls (and authz); a record with a size or hashes is refused (400), a
//!   stale `rev` is 409. Its `form` stays null, as in Indexd.
//!
//! Writes find a record by its exact did, and answer `{did, rev, baseid}`
//! with a new `rev`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Path, Query, State as Extract};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::auth;
use super::indexd::{
    as_indexd, bad_request, error, ids, json_body, new_rev, store, up, uuid4, Body, IndexRecord,
    PREFIX,
};
use super::reply::{Refusal, Reply};
use super::schema;
use super::state::{Shared, State};

/// The `?rev=` of a write.
#[derive(Debug, Deserialize)]
pub(crate) struct Rev {
    rev: Option<String>,
}

fn no_record() -> Refusal {
    error(StatusCode::NOT_FOUND, "no record found")
}

fn mismatch() -> Refusal {
    error(StatusCode::CONFLICT, "revision mismatch")
}

/// The record of exactly `did`, if `rev` is its revision.
fn at_rev<'a>(state: &'a mut State, did: &str, rev: &Rev) -> Result<&'a mut IndexRecord, Refusal> {
    let record = state.records.get_mut(did).ok_or_else(no_record)?;
    if rev.rev.as_deref() != Some(record.rev.as_str()) {
        return Err(mismatch());
    }
    Ok(record)
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| Some(s.as_str()?.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn text(value: &Value) -> Option<String> {
    value.as_str().map(str::to_string)
}

/// Sets each field `changes` names (checked by `PUT_RECORD_SCHEMA`).
fn apply(record: &mut IndexRecord, changes: &Map<String, Value>) {
    for (field, value) in changes {
        match field.as_str() {
            "urls" => record.urls = strings(value),
            "acl" => record.acl = strings(value),
            "authz" => record.authz = strings(value),
            "file_name" => record.file_name = text(value),
            "version" => record.version = text(value),
            "uploader" => record.uploader = text(value),
            "description" => record.description = text(value),
            "metadata" => record.metadata = value.as_object().cloned().unwrap_or_default(),
            // urls_metadata and the content dates are taken and not kept.
            _ => {}
        }
    }
    record.rev = new_rev();
    record.updated = SystemTime::now();
}

/// `PUT /index/{did}?rev=R` -> `{did, baseid, rev}`.
pub(crate) async fn update(
    Extract(shared): Extract<Arc<Shared>>,
    Path(did): Path<String>,
    Query(rev): Query<Rev>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let mut state = shared.lock();
    state.counts.index_update += 1;
    up(&state)?;
    let body = json_body(body)?;
    schema::check_put(&body).map_err(bad_request)?;
    let changes = body.as_object().cloned().unwrap_or_default();
    at_rev(&mut state, &did, &rev)?;
    auth::check_indexd_write(&state, &headers).map_err(as_indexd)?;
    let record = at_rev(&mut state, &did, &rev)?;
    apply(record, &changes);
    Ok(Json(ids(record)).into_response())
}

/// A blank record, as `POST /index/blank/` makes one: a did of this
/// Indexd's form, no size, hashes or URLs, and `form` null.
pub(crate) fn register_blank(
    state: &mut State,
    uploader: Option<String>,
    file_name: Option<String>,
    authz: Vec<String>,
) -> Result<IndexRecord, Refusal> {
    let now = SystemTime::now();
    let record = IndexRecord {
        did: format!("{PREFIX}/{}", uuid4()),
        baseid: uuid4(),
        rev: new_rev(),
        form: None,
        size: None,
        file_name,
        hashes: BTreeMap::new(),
        urls: Vec::new(),
        authz,
        acl: Vec::new(),
        version: None,
        metadata: Map::new(),
        uploader,
        description: None,
        created: now,
        updated: now,
        serial: 0,
    };
    store(state, record)
}

/// The body of `POST /index/blank/`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct NewBlank {
    #[serde(default)]
    uploader: Option<String>,
    #[serde(default)]
    file_name: Option<String>,
    #[serde(default)]
    authz: Option<Vec<String>>,
}

/// `POST /index/blank/` -> 201 `{did, rev, baseid}`: an upload begun.
pub(crate) async fn create_blank(
    Extract(shared): Extract<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let mut state = shared.lock();
    state.counts.index_post += 1;
    up(&state)?;
    auth::check_indexd_write(&state, &headers).map_err(as_indexd)?;
    let new: NewBlank = match body {
        Ok(Json(value)) => serde_json::from_value(value).map_err(|e| bad_request(e.to_string()))?,
        // Indexd reads a body it cannot parse as none.
        Err(_) => NewBlank::default(),
    };
    let authz = new.authz.unwrap_or_default();
    let record = register_blank(&mut state, new.uploader, new.file_name, authz)?;
    Ok((StatusCode::CREATED, Json(ids(&record))).into_response())
}

/// The body of `PUT /index/blank/{did}`: Indexd checks no schema here.
#[derive(Debug, Deserialize)]
pub(crate) struct Completion {
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    hashes: BTreeMap<String, String>,
    #[serde(default)]
    urls: Vec<String>,
    #[serde(default)]
    authz: Option<Vec<String>>,
}

/// `PUT /index/blank/{did}?rev=R` -> `{did, rev, baseid}`: the blank record
/// gets its size, hashes, urls (and authz when given).
pub(crate) async fn complete_blank(
    Extract(shared): Extract<Arc<Shared>>,
    Path(did): Path<String>,
    Query(rev): Query<Rev>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let mut state = shared.lock();
    state.counts.index_update += 1;
    up(&state)?;
    let body = json_body(body)?;
    let done: Completion = serde_json::from_value(body).map_err(|e| bad_request(e.to_string()))?;
    let record = state.records.get(&did).ok_or_else(no_record)?;
    if !record.is_blank() {
        return Err(bad_request(
            "update api is not supported for non-empty record!",
        ));
    }
    at_rev(&mut state, &did, &rev)?;
    auth::check_indexd_write(&state, &headers).map_err(as_indexd)?;
    let record = at_rev(&mut state, &did, &rev)?;
    record.size = done.size;
    record.hashes = done.hashes;
    record.urls = done.urls;
    if let Some(authz) = done.authz {
        record.authz = authz;
    }
    record.rev = new_rev();
    record.updated = SystemTime::now();
    Ok(Json(ids(record)).into_response())
}
