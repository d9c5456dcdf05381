//! `/data/{id}`: the bytes, as an object store serves them. GET and HEAD
//! with a strong ETag (the md5 of the bytes), `Last-Modified`, one `Range`
//! (206, or 416 past the end), and `If-Match` (412 on another ETag). A
//! request is let through when it satisfies one of the object's access
//! methods: a served one's required headers, or a signed one's unexpired
//! signature. Bytes are counted as the body is polled, so a transfer broken
//! off counts what was handed to the connection, not the whole object.

use std::ops::Range;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State as Extract};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::stream;

use super::auth;
use super::reply::{Refusal, Reply};
use super::spec::AccessSpec;
use super::state::{Blob, Entry, Shared};

/// The body goes out in pieces of this size, each counted when sent.
const PIECE: usize = 64 << 10;

/// A signed URL to the bytes of `id`, valid for `ttl_secs`.
pub(crate) fn signed_url(shared: &Shared, id: &str, ttl_secs: u64) -> String {
    let expires = auth::unix_now() + ttl_secs;
    let sig = auth::sign(&shared.secret, &signed_message(id, expires));
    let url = super::render::data_url(&shared.base_url, id);
    format!("{url}?expires={expires}&sig={sig}")
}

fn signed_message(id: &str, expires: u64) -> String {
    format!("{id}\n{expires}")
}

/// What serving needs of an object, taken out of the lock.
struct Served {
    bytes: Arc<[u8]>,
    etag: String,
    last_modified: String,
}

pub(crate) async fn serve(
    Extract(shared): Extract<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: HeaderMap,
) -> Reply {
    let object = {
        let mut state = shared.lock();
        match method {
            Method::HEAD => state.counts.data_head += 1,
            _ => state.counts.data_get += 1,
        }
        let Some(Entry::Blob(blob)) = state.objects.get(&id) else {
            return Err(Refusal::not_found(format!("object {id}")));
        };
        admit(&shared, &id, blob, query.as_deref(), &headers)?;
        served(&id, blob)?
    };
    if let Some(wanted) = headers.get(header::IF_MATCH).and_then(|v| v.to_str().ok()) {
        if !etag_matches(wanted, &object.etag) {
            return Err(Refusal::Error(
                StatusCode::PRECONDITION_FAILED,
                "ETag differs".into(),
            ));
        }
    }
    let size = object.bytes.len() as u64;
    let asked = headers.get(header::RANGE).and_then(|v| v.to_str().ok());
    let range = match asked.map_or(Asked::Whole, |asked| parse_range(asked, size)) {
        Asked::Whole => None,
        Asked::Part(range) => Some(range),
        Asked::Unsatisfiable => return Err(unsatisfiable(size)),
    };
    Ok(respond(shared, object, range, method == Method::HEAD))
}

/// The object's bytes and validators, or 404 for a metadata-only object
/// or one with no access method served here.
fn served(id: &str, blob: &Blob) -> Result<Served, Refusal> {
    let here = blob
        .access
        .iter()
        .any(|a| matches!(a, AccessSpec::Served { .. } | AccessSpec::Signed { .. }));
    match (&blob.bytes, &blob.etag) {
        (Some(bytes), Some(etag)) if here => Ok(Served {
            bytes: bytes.clone(),
            etag: etag.clone(),
            last_modified: httpdate::fmt_http_date(blob.created),
        }),
        _ => Err(Refusal::not_found(format!("bytes of {id}"))),
    }
}

/// Lets the request through when one access method allows it: 401 when it
/// carries nothing that could, 403 when what it carries is wrong or expired.
fn admit(
    shared: &Shared,
    id: &str,
    blob: &Blob,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<(), Refusal> {
    let signature = query.and_then(signature);
    let allowed = blob.access.iter().any(|access| match access {
        AccessSpec::Served { headers: wanted } => {
            signature.is_none() && has_headers(headers, wanted)
        }
        AccessSpec::Signed { .. } => signature.as_ref().is_some_and(|(expires, sig)| {
            *expires >= auth::unix_now()
                && auth::verify(&shared.secret, &signed_message(id, *expires), sig)
        }),
        AccessSpec::Url { .. } => false,
    });
    if allowed {
        Ok(())
    } else if signature.is_some() || headers.contains_key(header::AUTHORIZATION) {
        Err(Refusal::forbidden(
            "signature or credentials wrong or expired",
        ))
    } else {
        Err(Refusal::Unauthorized {
            scheme: "Bearer",
            msg: "the access method's headers or a signed URL are required".into(),
        })
    }
}

/// `expires` and `sig` from a query string.
fn signature(query: &str) -> Option<(u64, String)> {
    let mut expires = None;
    let mut sig = None;
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match &*key {
            "expires" => expires = value.parse().ok(),
            "sig" => sig = Some(value.into_owned()),
            _ => {}
        }
    }
    Some((expires?, sig?))
}

/// Whether every `Name: value` in `wanted` is among `headers`.
fn has_headers(headers: &HeaderMap, wanted: &[String]) -> bool {
    wanted.iter().all(|line| {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        headers
            .get_all(name.trim())
            .iter()
            .any(|v| v.as_bytes() == value.trim().as_bytes())
    })
}

fn etag_matches(if_match: &str, etag: &str) -> bool {
    if_match
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.trim_matches('"') == etag)
}

/// What a `Range` header asks of a body of some size.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    /// No usable range (another unit, several ranges, a malformed one):
    /// the whole body is a valid answer.
    Whole,
    Part(Range<u64>),
    /// Starts at or past the end: 416.
    Unsatisfiable,
}

/// One `bytes=FIRST-[LAST]` or `bytes=-SUFFIX` range within `size`.
fn parse_range(value: &str, size: u64) -> Asked {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return Asked::Whole;
    };
    let Some((first, last)) = spec.split_once('-').filter(|_| !spec.contains(',')) else {
        return Asked::Whole;
    };
    let (first, last) = (first.trim(), last.trim());
    let range = match (first.parse::<u64>(), last.parse::<u64>()) {
        (Ok(first), Ok(last)) if last >= first => first..last.saturating_add(1).min(size),
        (Ok(first), Err(_)) if last.is_empty() => first..size,
        (Err(_), Ok(suffix)) if first.is_empty() => size.saturating_sub(suffix)..size,
        _ => return Asked::Whole,
    };
    if range.start < range.end {
        Asked::Part(range)
    } else {
        Asked::Unsatisfiable
    }
}

fn unsatisfiable(size: u64) -> Refusal {
    Refusal::Error(
        StatusCode::RANGE_NOT_SATISFIABLE,
        format!("range outside 0..{size}"),
    )
}

fn respond(shared: Arc<Shared>, object: Served, range: Option<Range<u64>>, head: bool) -> Response {
    let size = object.bytes.len() as u64;
    let status = if range.is_some() {
        StatusCode::PARTIAL_CONTENT
    } else {
        StatusCode::OK
    };
    let range = range.unwrap_or(0..size);
    let mut response = (
        status,
        [
            (header::ETAG, format!("\"{}\"", object.etag)),
            (header::LAST_MODIFIED, object.last_modified.clone()),
            (header::ACCEPT_RANGES, "bytes".into()),
            (header::CONTENT_TYPE, "application/octet-stream".into()),
            (
                header::CONTENT_LENGTH,
                (range.end - range.start).to_string(),
            ),
        ],
    )
        .into_response();
    if status == StatusCode::PARTIAL_CONTENT {
        let value = format!("bytes {}-{}/{size}", range.start, range.end - 1);
        response.headers_mut().insert(
            header::CONTENT_RANGE,
            value.parse().expect("a valid header"),
        );
    }
    if !head {
        *response.body_mut() = counted_body(shared, object.bytes, range);
    }
    response
}

/// The bytes of `range`, in pieces counted into `data_bytes` as they go.
fn counted_body(shared: Arc<Shared>, bytes: Arc<[u8]>, range: Range<u64>) -> Body {
    let starts = (range.start..range.end).step_by(PIECE);
    let pieces = starts.map(move |start| {
        let end = (start + PIECE as u64).min(range.end);
        shared.lock().counts.data_bytes += end - start;
        Ok::<_, std::convert::Infallible>(Bytes::copy_from_slice(
            &bytes[start as usize..end as usize],
        ))
    });
    Body::from_stream(stream::iter(pieces))
}
