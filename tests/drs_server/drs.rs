//! The DRS endpoints. Every one counts the request, then checks the
//! caller, then any deferral (202 + `Retry-After`), then answers.
//!
//! Ids are percent-encoded path segments, so `/objects/` is routed as one
//! wildcard and split here on the raw path: an encoded `/` (`%2F`) belongs
//! to the id, a literal `/access/` separates the access id. A literal `/`
//! elsewhere is taken as part of the id, as Indexd's dids are often sent
//! unencoded (`dg.TEST/<uuid>`).

use std::sync::Arc;

use axum::extract::{RawQuery, State as Extract};
use axum::http::{HeaderMap, Uri};
use axum::response::IntoResponse;
use axum::Json;
use percent_encoding::percent_decode_str;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth;
use super::data::signed_url;
use super::fence;
use super::render::{self, Lookup};
use super::reply::{Refusal, Reply};
use super::spec::{AccessSpec, Auth, Endpoint};
use super::state::{Entry, Shared, State};
use super::DRS_PATH;

/// Whether a query asks `expand=true` (any case: Python clients send
/// `True`).
fn expand(query: Option<&str>) -> bool {
    url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .any(|(key, value)| key == "expand" && value.eq_ignore_ascii_case("true"))
}

/// `GET /service-info`: GA4GH service-info; with bulk requests on, DRS
/// 1.4's `drs.maxBulkRequestLength` too.
pub(crate) async fn service_info(Extract(shared): Extract<Arc<Shared>>) -> Reply {
    let mut state = shared.lock();
    state.counts.service_info += 1;
    let version = if state.bulk_max.is_some() {
        "1.4.0"
    } else {
        "1.2.0"
    };
    let mut info = json!({
        "id": "org.drsd.test.drs",
        "name": "drsd test DRS and Indexd server",
        "type": { "group": "org.ga4gh", "artifact": "drs", "version": version },
        "description": "An in-process DRS server with a Gen3 Indexd subset, for drsd's tests",
        "organization": { "name": "drsd", "url": shared.base_url },
        "version": env!("CARGO_PKG_VERSION"),
    });
    if let Some(max) = state.bulk_max {
        info["drs"] = json!({ "maxBulkRequestLength": max });
    }
    Ok(Json(info).into_response())
}

/// What a path under `/objects/` names.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    Object(String),
    Access { id: String, access_id: String },
}

/// Splits the raw path after `/objects/` and decodes each part.
fn target(path: &str) -> Option<Target> {
    let rest = path.strip_prefix(&format!("{DRS_PATH}/objects/"))?;
    let decode = |s: &str| {
        percent_decode_str(s)
            .decode_utf8()
            .ok()
            .map(|d| d.into_owned())
    };
    match rest.rsplit_once("/access/") {
        Some((id, access_id)) if !id.is_empty() && !access_id.is_empty() => Some(Target::Access {
            id: decode(id)?,
            access_id: decode(access_id)?,
        }),
        _ if rest.is_empty() => None,
        _ => Some(Target::Object(decode(rest)?)),
    }
}

/// `GET /objects/{id}` and `GET /objects/{id}/access/{access_id}`.
pub(crate) async fn object_or_access(
    Extract(shared): Extract<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
) -> Reply {
    match target(uri.path()) {
        Some(Target::Object(id)) => object(&shared, &id, expand(uri.query()), &headers),
        Some(Target::Access { id, access_id }) => access(&shared, &id, &access_id, &headers),
        None => Err(Refusal::bad_request("no object id in the path")),
    }
}

/// Checks the caller, then a deferral for `id` on `endpoint`.
fn admit(
    state: &mut State,
    headers: &HeaderMap,
    endpoint: Endpoint,
    id: &str,
) -> Result<(), Refusal> {
    auth::check_drs(state, headers)?;
    match state.take_deferral(endpoint, id) {
        Some(secs) => Err(Refusal::Later(secs)),
        None => Ok(()),
    }
}

fn object(shared: &Shared, id: &str, expand: bool, headers: &HeaderMap) -> Reply {
    let mut state = shared.lock();
    state.counts.objects_get += 1;
    admit(&mut state, headers, Endpoint::Object, id)?;
    let object = render::drs_object(&state, &shared.base_url, id, expand, Lookup::Lenient)
        .ok_or_else(|| Refusal::not_found(format!("DRS object {id}")))?;
    Ok(Json(object).into_response())
}

/// The `{url, headers}` an access id resolves to (`signed_access`).
fn access(shared: &Shared, id: &str, access_id: &str, headers: &HeaderMap) -> Reply {
    let mut state = shared.lock();
    state.counts.access += 1;
    admit(&mut state, headers, Endpoint::Access, id)?;
    let url = signed_access(shared, &state, id, access_id, headers)?;
    Ok(Json(json!({ "url": url })).into_response())
}

/// The URL an access id of `id` resolves to: a freshly signed URL for a
/// signed method of a test's object; for an Indexd record, Fence's answer
/// (`fence::signed_download`, the access id as the protocol), as a commons
/// mounts Fence's access route beside Indexd's DRS.
fn signed_access(
    shared: &Shared,
    state: &State,
    id: &str,
    access_id: &str,
    headers: &HeaderMap,
) -> Result<String, Refusal> {
    let missing = || Refusal::not_found(format!("access id {access_id} of DRS object {id}"));
    let blob = match state.objects.get(id) {
        Some(Entry::Blob(blob)) => blob,
        Some(Entry::Bundle(_)) => return Err(missing()),
        None => return fence::signed_download(shared, state, headers, id, Some(access_id), None),
    };
    let ttl = blob.access.iter().find_map(|a| match a {
        AccessSpec::Signed {
            access_id: known,
            ttl,
            ..
        } if known == access_id => Some(ttl.as_secs()),
        _ => None,
    });
    let ttl = ttl.ok_or_else(missing)?;
    Ok(signed_url(shared, id, ttl))
}

#[derive(Deserialize)]
pub(crate) struct BulkAccessRequest {
    bulk_object_access_ids: Vec<BulkObjectAccessIds>,
    /// Read and not checked: this server takes the caller's credential.
    #[serde(default)]
    #[allow(dead_code)]
    passports: Vec<String>,
}

#[derive(Deserialize)]
pub(crate) struct BulkObjectAccessIds {
    bulk_object_id: String,
    #[serde(default)]
    bulk_access_ids: Vec<String>,
}

/// `POST /objects/access` `{bulk_object_access_ids}` (DRS 1.4,
/// GetBulkAccessURL): 404 when switched off (as Indexd and Fence), 202
/// when any object is deferred on `Endpoint::Access`; else a URL per
/// object and access id that resolves as `GET /objects/{id}/access/{aid}`
/// would, and the others unresolved, grouped by the status that GET
/// would answer.
pub(crate) async fn bulk_access(
    Extract(shared): Extract<Arc<Shared>>,
    headers: HeaderMap,
    body: Result<Json<BulkAccessRequest>, axum::extract::rejection::JsonRejection>,
) -> Reply {
    let mut state = shared.lock();
    state.counts.bulk_access += 1;
    if !state.bulk_access {
        return Err(Refusal::not_found("bulk access URLs"));
    }
    auth::check_drs(&state, &headers)?;
    let Json(request) = body.map_err(|e| Refusal::bad_request(e.body_text()))?;
    if request.bulk_object_access_ids.is_empty() {
        return Err(Refusal::bad_request("bulk_object_access_ids is empty"));
    }
    let deferred = request
        .bulk_object_access_ids
        .iter()
        .filter_map(|ask| state.take_deferral(Endpoint::Access, &ask.bulk_object_id))
        .max();
    if let Some(secs) = deferred {
        return Err(Refusal::Later(secs));
    }
    let answer = access_all(&shared, &state, &request, &headers);
    Ok(Json(answer).into_response())
}

/// The bulk access answer: `summary` (pairs asked, resolved, not),
/// `unresolved_drs_objects` grouped by error code, and
/// `resolved_drs_object_access_urls`.
fn access_all(
    shared: &Shared,
    state: &State,
    request: &BulkAccessRequest,
    headers: &HeaderMap,
) -> Value {
    let mut resolved = Vec::new();
    let mut unresolved: std::collections::BTreeMap<u16, Vec<String>> = Default::default();
    let mut requested = 0;
    for ask in &request.bulk_object_access_ids {
        let id = &ask.bulk_object_id;
        if ask.bulk_access_ids.is_empty() {
            requested += 1;
            unresolved.entry(400).or_default().push(id.clone());
        }
        for access_id in &ask.bulk_access_ids {
            requested += 1;
            match signed_access(shared, state, id, access_id, headers) {
                Ok(url) => resolved.push(json!({
                    "drs_object_id": id,
                    "drs_access_id": access_id,
                    "url": url,
                })),
                Err(refusal) => unresolved
                    .entry(refusal.status().as_u16())
                    .or_default()
                    .push(id.clone()),
            }
        }
    }
    let unresolved_count: usize = unresolved.values().map(Vec::len).sum();
    let groups: Vec<Value> = unresolved
        .into_iter()
        .map(|(code, ids)| json!({ "error_code": code, "object_ids": ids }))
        .collect();
    json!({
        "summary": {
            "requested": requested,
            "resolved": resolved.len(),
            "unresolved": unresolved_count,
        },
        "unresolved_drs_objects": groups,
        "resolved_drs_object_access_urls": resolved,
    })
}

/// `OPTIONS /objects/{id}` (DRS 1.3): the authorizations the object takes.
/// Open to all, as the spec has it.
pub(crate) async fn options(Extract(shared): Extract<Arc<Shared>>, uri: Uri) -> Reply {
    let Some(Target::Object(id)) = target(uri.path()) else {
        return Err(Refusal::bad_request("OPTIONS takes an object path"));
    };
    let mut state = shared.lock();
    state.counts.objects_options += 1;
    if let Some(secs) = state.take_deferral(Endpoint::Options, &id) {
        return Err(Refusal::Later(secs));
    }
    if !state.objects.contains_key(&id) && !state.records.contains_key(&id) {
        return Err(Refusal::not_found(format!("DRS object {id}")));
    }
    let mut answer = json!({ "drs_object_id": id });
    match &state.auth {
        Auth::None => answer["supported_types"] = json!(["None"]),
        Auth::Basic { .. } => answer["supported_types"] = json!(["BasicAuth"]),
        Auth::Bearer => {
            answer["supported_types"] = json!(["BearerAuth"]);
            answer["bearer_auth_issuers"] = json!([format!("{}/user", shared.base_url)]);
        }
    }
    Ok(Json(answer).into_response())
}

#[derive(Deserialize)]
pub(crate) struct BulkRequest {
    bulk_object_ids: Vec<String>,
    #[serde(default)]
    expand: bool,
}

/// `POST /objects` `{bulk_object_ids}` (DRS 1.4): 404 when bulk requests
/// are off, 202 when any id is deferred; else the objects found by their
/// exact id and the ids not found. As Indexd 6.3: no 413, however many ids
/// past the `maxBulkRequestLength` it declares, and a record matched by
/// its exact did only (a single GET also takes it without its prefix).
pub(crate) async fn bulk(
    Extract(shared): Extract<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Result<Json<BulkRequest>, axum::extract::rejection::JsonRejection>,
) -> Reply {
    let mut state = shared.lock();
    state.counts.bulk_post += 1;
    if state.bulk_max.is_none() {
        return Err(Refusal::not_found("bulk requests"));
    }
    auth::check_drs(&state, &headers)?;
    let Json(request) = body.map_err(|e| Refusal::bad_request(e.body_text()))?;
    if request.bulk_object_ids.is_empty() {
        return Err(Refusal::bad_request("bulk_object_ids is empty"));
    }
    let deferred = request
        .bulk_object_ids
        .iter()
        .filter_map(|id| state.take_deferral(Endpoint::Bulk, id))
        .max();
    if let Some(secs) = deferred {
        return Err(Refusal::Later(secs));
    }
    let expand = expand(query.as_deref()) || request.expand;
    Ok(Json(resolve_all(
        &state,
        &shared.base_url,
        &request.bulk_object_ids,
        expand,
    ))
    .into_response())
}

/// The bulk answer as Indexd writes it: `summary`,
/// `unresolved_drs_objects` (grouped by error code: all 404 here, sorted)
/// and `resolved_drs_objects` (Indexd's key; DRS 1.4 spells it
/// `resolved_drs_object`).
fn resolve_all(state: &State, base_url: &str, ids: &[String], expand: bool) -> Value {
    let mut resolved = Vec::new();
    let mut unresolved = Vec::new();
    for id in ids {
        match render::drs_object(state, base_url, id, expand, Lookup::Exact) {
            Some(object) => resolved.push(object),
            None => unresolved.push(id.clone()),
        }
    }
    unresolved.sort();
    let unresolved_groups = if unresolved.is_empty() {
        json!([])
    } else {
        json!([{ "error_code": 404, "object_ids": unresolved }])
    };
    json!({
        "summary": {
            "requested": ids.len(),
            "resolved": resolved.len(),
            "unresolved": ids.len() - resolved.len(),
        },
        "unresolved_drs_objects": unresolved_groups,
        "resolved_drs_objects": resolved,
    })
}
