//! Gen3 Fence's data routes under `/user/data/`, and its DRS access
//! route for Indexd records, as uc-cdis/fence 13.3.0 (commit d03fe036)
//! answers them, read in `fence/blueprints/data/blueprint.py`
//! (`upload_data_file`, `init_multipart_upload`,
//! `generate_multipart_upload_presigned_url`, `complete_multipart_upload`,
//! `upload_file`, `download_file`) and `fence/blueprints/data/indexd.py`
//! (`BlankIndex`):
//!
//! - `POST /user/data/upload` `{file_name, authz?, guid?, expires_in?,
//!   bucket?}` -> 201 `{guid, url}`: a URL signed to PUT
//!   `{guid}/{file_name}` into the upload bucket, for the record `guid`
//!   names, or a new blank record (`POST /index/blank/`) without one;
//! - `GET /user/data/upload/{guid}?file_name=&expires_in=` -> `{url}` for a
//!   record registered first;
//! - `POST /user/data/multipart/init` `{file_name, guid?}` -> 201 `{guid,
//!   uploadId}`: the upload of `{guid}/{file_name}`, for the record `guid`
//!   names, else a new blank record's. **A guid must be a record Indexd
//!   holds**: `BlankIndex.__init__` sets `self.guid =
//!   self.index_document["did"]`, which GETs `/index/{guid}` and raises
//!   NotFound (404, `No indexed document found with id {guid}`) when there
//!   is none (since fence 391865be, released in 10.2.0); Fence never
//!   fills or changes that record. Before 10.2.0 both routes ignored a
//!   guid and made a blank record (`set_fence_before_10_2`);
//! - `POST /user/data/multipart/upload` `{key, uploadId, partNumber}` ->
//!   `{presigned_url}`; `POST /user/data/multipart/complete` `{key,
//!   uploadId, parts: [{PartNumber, ETag}]}` -> `{message: "OK"}`, Fence
//!   forwarding the parts to the store and checking nothing of what it
//!   assembled (a store that drops a part: `set_complete_drops_last_part`);
//!   the store's refusal as JSON `{message}` with its code, the one error
//!   the route answers itself;
//! - `GET /user/data/download/{guid}?protocol=&expires_in=` and DRS
//!   `GET /objects/{id}/access/{access_id}` of an Indexd record -> `{url}`
//!   signed to GET its location in the upload bucket; another bucket is 500
//!   (Fence has no key for it), an http(s) location is handed on as it is.
//!
//! Every other error is Fence's HTML error page (`reply.rs`). Every route
//! wants a bearer token Fence issued (401 otherwise), but a download of a
//! public record (acl `*`, no authz). Arborist's policies are not
//! modelled: a good token may upload or read anything.

use std::sync::Arc;

use axum::extract::{Path, Query, State as Extract};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth;
use super::bucket::{self, Grant, UPLOAD_BUCKET};
use super::indexd::{find, Body};
use super::reply::{Refusal, Reply};
use super::state::{Shared, State};
use super::update::register_blank;

fn refuse(status: StatusCode, msg: impl Into<String>) -> Refusal {
    Refusal::Fence(status, msg.into())
}

fn user_error(msg: impl Into<String>) -> Refusal {
    refuse(StatusCode::BAD_REQUEST, msg)
}

/// The JSON object of a body, or Fence's 400.
fn params(body: Body) -> Result<serde_json::Map<String, Value>, Refusal> {
    let wrong = || user_error("wrong Content-Type; expected application/json");
    let Json(value) = body.map_err(|_| wrong())?;
    match value {
        Value::Object(map) if !map.is_empty() => Ok(map),
        _ => Err(wrong()),
    }
}

/// Fence's `missing required argument(s)` for `names` absent from `params`.
fn require(params: &serde_json::Map<String, Value>, names: &[&str]) -> Result<(), Refusal> {
    let missing: Vec<String> = names
        .iter()
        .filter(|n| !params.contains_key(**n))
        .map(|n| format!("'{n}'"))
        .collect();
    match missing.as_slice() {
        [] => Ok(()),
        [one] if names.len() == 1 => Err(user_error(format!(
            "missing required argument `{}`",
            one.trim_matches('\'')
        ))),
        _ => Err(user_error(format!(
            "missing required arguments: [{}]",
            missing.join(", ")
        ))),
    }
}

/// The lifetime of a URL signed now: `asked` (a positive integer, number or
/// text) capped by `MAX_PRESIGNED_URL_TTL`, which is also the default.
fn lifetime(state: &State, asked: Option<&Value>) -> Result<u64, Refusal> {
    let max = state.signed_url_ttl.as_secs().max(1);
    let Some(asked) = asked.filter(|v| !v.is_null()) else {
        return Ok(max);
    };
    let secs = asked
        .as_u64()
        .or_else(|| asked.as_str().and_then(|s| s.parse().ok()))
        .filter(|s| *s > 0);
    secs.map(|s| s.min(max)).ok_or_else(|| {
        user_error(format!(
            "Requested expiry must be a positive integer; instead got {asked}"
        ))
    })
}

/// Only the upload bucket is configured for uploads.
fn check_bucket(params: &serde_json::Map<String, Value>) -> Result<(), Refusal> {
    match params.get("bucket").and_then(Value::as_str) {
        Some(bucket) if bucket != UPLOAD_BUCKET => Err(refuse(
            StatusCode::FORBIDDEN,
            format!("Uploading to bucket '{bucket}' is not allowed"),
        )),
        _ => Ok(()),
    }
}

fn text<'a>(params: &'a serde_json::Map<String, Value>, name: &str) -> Option<&'a str> {
    params.get(name).and_then(Value::as_str)
}

/// The did of the record `guid` names (Indexd's lenient lookup), or 404.
fn existing(state: &State, guid: &str) -> Result<String, Refusal> {
    find(state, guid).map(|r| r.did.clone()).ok_or_else(|| {
        refuse(
            StatusCode::NOT_FOUND,
            format!("No indexed document found with id {guid}"),
        )
    })
}

/// The record for an upload: the one `guid` names, or a new blank one
/// (uploader: the caller, unless authz is given).
fn upload_record(
    state: &mut State,
    params: &serde_json::Map<String, Value>,
    subject: String,
    authz: Vec<String>,
) -> Result<String, Refusal> {
    if let Some(guid) = text(params, "guid").filter(|_| !state.fence_before_10_2) {
        return existing(state, guid);
    }
    let uploader = authz.is_empty().then_some(subject);
    let file_name = text(params, "file_name").map(str::to_string);
    let blank = register_blank(state, uploader, file_name, authz).map_err(|_| {
        refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "received error from indexd trying to create blank record",
        )
    })?;
    Ok(blank.did)
}

/// `POST /user/data/upload` -> 201 `{guid, url}`.
pub(crate) async fn upload(
    Extract(shared): Extract<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let mut state = shared.lock();
    state.counts.fence += 1;
    let subject = auth::fence_subject(&state, &headers)?;
    let params = params(body)?;
    require(&params, &["file_name"])?;
    let authz: Vec<String> = params
        .get("authz")
        .and_then(|a| serde_json::from_value(a.clone()).ok())
        .unwrap_or_default();
    let ttl = lifetime(&state, params.get("expires_in"))?;
    check_bucket(&params)?;
    let guid = upload_record(&mut state, &params, subject, authz)?;
    let file_name = text(&params, "file_name").unwrap_or_default();
    let url = put_url(&shared, &format!("{guid}/{file_name}"), ttl);
    Ok((
        StatusCode::CREATED,
        Json(json!({ "guid": guid, "url": url })),
    )
        .into_response())
}

fn put_url(shared: &Shared, key: &str, ttl: u64) -> String {
    if let Some(s3) = &shared.s3 {
        return s3.put_url(key, ttl);
    }
    let grant = Grant {
        method: "PUT",
        key: key.to_string(),
        part: None,
    };
    bucket::sign(shared, &grant, ttl)
}

/// The query of Fence's GET routes.
#[derive(Debug, Deserialize)]
pub(crate) struct Asked {
    file_name: Option<String>,
    expires_in: Option<String>,
    protocol: Option<String>,
}

/// `GET /user/data/upload/{guid}?file_name=` -> `{url}`: the record must
/// exist; the key is `{did}/{file_name}` (file_name defaults to the guid
/// with `/` as `_`, as Fence has it).
pub(crate) async fn upload_url(
    Extract(shared): Extract<Arc<Shared>>,
    Path(guid): Path<String>,
    Query(asked): Query<Asked>,
    headers: HeaderMap,
) -> Reply {
    let mut state = shared.lock();
    state.counts.fence += 1;
    auth::fence_subject(&state, &headers)?;
    let did = existing(&state, &guid)?;
    let ttl = lifetime(&state, asked.expires_in.map(Value::from).as_ref())?;
    let file_name = asked.file_name.unwrap_or_else(|| guid.replace('/', "_"));
    let url = put_url(&shared, &format!("{did}/{file_name}"), ttl);
    Ok(Json(json!({ "url": url })).into_response())
}

/// `POST /user/data/multipart/init` -> 201 `{guid, uploadId}`.
pub(crate) async fn multipart_init(
    Extract(shared): Extract<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    // The state's lock is let go before the store is called.
    let (guid, key, upload) = {
        let mut state = shared.lock();
        state.counts.fence += 1;
        let subject = auth::fence_subject(&state, &headers)?;
        let params = params(body)?;
        require(&params, &["file_name"])?;
        lifetime(&state, params.get("expires_in"))?;
        check_bucket(&params)?;
        let guid = upload_record(&mut state, &params, subject, Vec::new())?;
        let key = format!("{guid}/{}", text(&params, "file_name").unwrap_or_default());
        let upload = match &shared.s3 {
            None => Some(bucket::begin(&mut state.bucket, &key)),
            Some(_) => None,
        };
        (guid, key, upload)
    };
    let upload = match (upload, &shared.s3) {
        (Some(upload), _) => upload,
        (None, Some(s3)) => s3.begin(&key).await.map_err(|e| {
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Can not initiate multipart upload for {key}: {e}"),
            )
        })?,
        (None, None) => unreachable!("an upload is begun in the server's own bucket"),
    };
    let answer = json!({ "guid": guid, "uploadId": upload });
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// `POST /user/data/multipart/upload` -> `{presigned_url}` for one part.
/// As with S3, the URL is signed whether or not the upload exists; the
/// PUT finds out.
pub(crate) async fn multipart_part(
    Extract(shared): Extract<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let mut state = shared.lock();
    state.counts.fence += 1;
    auth::fence_subject(&state, &headers)?;
    let params = params(body)?;
    require(&params, &["key", "uploadId", "partNumber"])?;
    let ttl = lifetime(&state, params.get("expires_in"))?;
    check_bucket(&params)?;
    let number = params["partNumber"]
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| user_error("partNumber must be an integer"))?;
    let grant = Grant {
        method: "PUT",
        key: text(&params, "key").unwrap_or_default().to_string(),
        part: Some((
            text(&params, "uploadId").unwrap_or_default().to_string(),
            number,
        )),
    };
    let url = match &shared.s3 {
        None => bucket::sign(&shared, &grant, ttl),
        Some(s3) => {
            let number =
                u16::try_from(number).map_err(|_| user_error("partNumber is too large"))?;
            let (upload, _) = grant.part.as_ref().expect("a part's grant");
            s3.part_url(&grant.key, upload, number, ttl)
        }
    };
    Ok(Json(json!({ "presigned_url": url })).into_response())
}

/// The parts of a completion: `PartNumber` and `ETag` (or `Etag`).
fn parts_of(parts: &Value) -> Result<Vec<(u32, String)>, Refusal> {
    let bad = || user_error("parts must be a list of {PartNumber, ETag}");
    let list = parts.as_array().ok_or_else(bad)?;
    list.iter()
        .map(|part| {
            let number = part["PartNumber"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok());
            let etag = part
                .get("ETag")
                .or_else(|| part.get("Etag"))
                .and_then(Value::as_str);
            match (number, etag) {
                (Some(n), Some(e)) => Ok((n, e.to_string())),
                _ => Err(bad()),
            }
        })
        .collect()
}

/// `POST /user/data/multipart/complete` -> `{message: "OK"}`.
pub(crate) async fn multipart_complete(
    Extract(shared): Extract<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let took = shared.lock().complete_takes;
    tokio::time::sleep(took).await;
    let (key, upload, parts) = {
        let mut state = shared.lock();
        state.counts.fence += 1;
        auth::fence_subject(&state, &headers)?;
        let params = params(body)?;
        require(&params, &["key", "uploadId", "parts"])?;
        check_bucket(&params)?;
        let key = text(&params, "key").unwrap_or_default().to_string();
        let upload = text(&params, "uploadId").unwrap_or_default().to_string();
        let mut parts = parts_of(&params["parts"])?;
        if state.complete_drops_last_part && parts.len() > 1 {
            parts.pop();
        }
        if shared.s3.is_none() {
            bucket::complete(&mut state.bucket, &key, &upload, &parts).map_err(|bucket::Refused(code, msg)| {
                Refusal::FenceJson(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("Can not complete multipart upload for {key}. Detail An error occurred ({code}) when calling the CompleteMultipartUpload operation: {msg}"),
                )
            })?;
        }
        (key, upload, parts)
    };
    if let Some(s3) = &shared.s3 {
        let etags: Vec<String> = parts.into_iter().map(|(_, etag)| etag).collect();
        s3.complete(&key, &upload, &etags).await.map_err(|e| {
            Refusal::FenceJson(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Can not complete multipart upload for {key}: {e}"),
            )
        })?;
    }
    Ok(Json(json!({ "message": "OK" })).into_response())
}

/// `GET /user/data/download/{guid}?protocol=&expires_in=` -> `{url}`.
pub(crate) async fn download(
    Extract(shared): Extract<Arc<Shared>>,
    Path(guid): Path<String>,
    Query(asked): Query<Asked>,
    headers: HeaderMap,
) -> Reply {
    let mut state = shared.lock();
    state.counts.fence += 1;
    let url = signed_download(
        &shared,
        &state,
        &headers,
        &guid,
        asked.protocol.as_deref(),
        asked.expires_in.as_deref(),
    )?;
    Ok(Json(json!({ "url": url })).into_response())
}

/// A URL to read the record `id` names (Indexd's lenient lookup): its first
/// location, or its first of the `protocol` asked (`s3`; `http` takes
/// `https` too), signed for the lifetime asked (capped).
pub(crate) fn signed_download(
    shared: &Shared,
    state: &State,
    headers: &HeaderMap,
    id: &str,
    protocol: Option<&str>,
    expires_in: Option<&str>,
) -> Result<String, Refusal> {
    let record = find(state, id).ok_or_else(|| {
        refuse(
            StatusCode::NOT_FOUND,
            format!("No indexed document found with id {id}"),
        )
    })?;
    let public = record.authz.is_empty() && record.acl.iter().any(|a| a == "*");
    if !public && auth::fence_subject(state, headers).is_err() {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            format!(
                "Either you weren't authenticated successfully or you don't have read-storage permission on authorization resource: {:?}.",
                record.authz
            ),
        ));
    }
    let ttl = lifetime(state, expires_in.map(Value::from).as_ref())?;
    let scheme = |url: &str| url.split_once("://").map(|(s, _)| s.to_string());
    let location = match protocol {
        None => record
            .urls
            .first()
            .ok_or_else(|| refuse(StatusCode::NOT_FOUND, "Can't find any file locations."))?,
        Some(wanted) => record
            .urls
            .iter()
            .find(|u| {
                let s = scheme(u);
                s.as_deref() == Some(wanted) || (wanted == "http" && s.as_deref() == Some("https"))
            })
            .ok_or_else(|| {
                refuse(
                    StatusCode::NOT_FOUND,
                    format!("File {id} does not have a location with specified protocol {wanted}."),
                )
            })?,
    };
    if let Some(key) = bucket::key_of(location) {
        let grant = Grant {
            method: "GET",
            key: key.to_string(),
            part: None,
        };
        return Ok(bucket::sign(shared, &grant, ttl));
    }
    if let Some(s3) = &shared.s3 {
        let prefix = format!("s3://{}/", s3.name());
        if let Some(key) = location.strip_prefix(&prefix) {
            return Ok(s3.get_url(key, ttl));
        }
    }
    match scheme(location).as_deref() {
        Some("http" | "https") => Ok(location.clone()),
        Some("s3") => Err(refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "permission denied for bucket",
        )),
        _ => Err(user_error(format!(
            "protocol of {location} is not supported"
        ))),
    }
}
