//! The commons' upload bucket, held in memory and served path-style at
//! `/s3/{bucket}/{key}`, reached only through the URLs Fence signs
//! (`fence`): a whole object's PUT, one part of a multipart upload, a GET.
//! Each URL is signed for one method, one key (and one upload id and part
//! number) and one expiry, as an S3 presigned URL is; past its expiry, or
//! used with another method, it is refused as S3 refuses it: 403 with S3's
//! XML error (`AccessDenied`, `Request has expired`, or
//! `SignatureDoesNotMatch`). Multipart follows S3: parts of 5 MiB at least
//! but the last, completion naming every part by its ETag in ascending
//! order, the object's ETag the md5 of the parts' md5s with `-N`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State as Extract};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use md5::Md5;
use sha2::Digest;

use super::auth;
use super::state::Shared;

/// The one bucket this commons' Fence is configured for
/// (`DATA_UPLOAD_BUCKET`): uploads land there, and only its locations are
/// signed for download.
pub const UPLOAD_BUCKET: &str = "commons-upload";

/// S3's least part size (all but the last part of a multipart upload).
pub(crate) const MIN_PART: usize = 5 << 20;

/// An object (or a part) in the bucket.
#[derive(Clone)]
pub(crate) struct Stored {
    pub bytes: Arc<[u8]>,
    /// Unquoted: the md5 hex, or `md5-N` for a multipart object.
    pub etag: String,
    pub created: SystemTime,
}

impl Stored {
    pub(crate) fn new(bytes: Vec<u8>) -> Stored {
        Stored {
            etag: hex::encode(Md5::digest(&bytes)),
            bytes: Arc::from(bytes),
            created: SystemTime::now(),
        }
    }

    fn of(bytes: Bytes) -> Stored {
        Stored::new(bytes.to_vec())
    }
}

/// A multipart upload begun and not completed.
pub(crate) struct Upload {
    pub key: String,
    pub parts: BTreeMap<u32, Stored>,
}

/// What the bucket holds: objects by key, uploads by upload id.
#[derive(Default)]
pub(crate) struct Bucket {
    pub objects: BTreeMap<String, Stored>,
    pub uploads: HashMap<String, Upload>,
}

/// What one signed URL allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    pub method: &'static str,
    pub key: String,
    pub part: Option<(String, u32)>,
}

impl Grant {
    fn message(&self, expires: u64) -> String {
        let (upload, number) = match &self.part {
            Some((upload, number)) => (upload.as_str(), number.to_string()),
            None => ("", String::new()),
        };
        format!(
            "{}\n{UPLOAD_BUCKET}/{}\n{expires}\n{upload}\n{number}",
            self.method, self.key
        )
    }
}

/// A URL allowing `grant` for `ttl_secs`.
pub(crate) fn sign(shared: &Shared, grant: &Grant, ttl_secs: u64) -> String {
    let expires = auth::unix_now() + ttl_secs;
    let sig = auth::sign(&shared.secret, &grant.message(expires));
    let key = super::render::encode_path(&grant.key);
    let mut url = format!(
        "{}/s3/{UPLOAD_BUCKET}/{key}?expires={expires}",
        shared.base_url
    );
    if let Some((upload, number)) = &grant.part {
        url.push_str(&format!("&uploadId={upload}&partNumber={number}"));
    }
    url.push_str(&format!("&sig={sig}"));
    url
}

/// `s3://UPLOAD_BUCKET/key` for `key`.
pub(crate) fn location(key: &str) -> String {
    format!("s3://{UPLOAD_BUCKET}/{key}")
}

/// The key of a location in the upload bucket.
pub(crate) fn key_of(url: &str) -> Option<&str> {
    url.strip_prefix("s3://")?
        .strip_prefix(UPLOAD_BUCKET)?
        .strip_prefix('/')
}

/// An S3 error: its status, code and message, in S3's XML body.
pub(crate) struct S3Error(StatusCode, &'static str, &'static str);

impl IntoResponse for S3Error {
    fn into_response(self) -> Response {
        let S3Error(status, code, message) = self;
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>"
        );
        (status, [(header::CONTENT_TYPE, "application/xml")], body).into_response()
    }
}

fn denied(message: &'static str) -> S3Error {
    S3Error(StatusCode::FORBIDDEN, "AccessDenied", message)
}

/// The query of a signed URL.
struct Signature {
    expires: u64,
    sig: String,
    part: Option<(String, u32)>,
}

fn signature(query: &str) -> Option<Signature> {
    let (mut expires, mut sig, mut upload, mut number) = (None, None, None, None);
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match &*key {
            "expires" => expires = value.parse().ok(),
            "sig" => sig = Some(value.into_owned()),
            "uploadId" => upload = Some(value.into_owned()),
            "partNumber" => number = value.parse().ok(),
            _ => {}
        }
    }
    let part = match (upload, number) {
        (Some(upload), Some(number)) => Some((upload, number)),
        _ => None,
    };
    Some(Signature {
        expires: expires?,
        sig: sig?,
        part,
    })
}

/// The grant a request proves, or S3's refusal: no signature (anonymous
/// on a private bucket), a signature for something else, or one expired.
fn admitted(
    shared: &Shared,
    method: &Method,
    key: &str,
    query: Option<&str>,
) -> Result<Grant, S3Error> {
    let Some(signed) = query.and_then(signature) else {
        return Err(denied("Access Denied"));
    };
    let grant = Grant {
        method: match *method {
            Method::PUT => "PUT",
            Method::HEAD => "HEAD",
            _ => "GET",
        },
        key: key.to_string(),
        part: signed.part,
    };
    if !auth::verify(&shared.secret, &grant.message(signed.expires), &signed.sig) {
        return Err(S3Error(
            StatusCode::FORBIDDEN,
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided.",
        ));
    }
    if signed.expires < auth::unix_now() {
        return Err(denied("Request has expired"));
    }
    Ok(grant)
}

/// `GET|HEAD|PUT /s3/{bucket}/{key}`.
pub(crate) async fn serve(
    Extract(shared): Extract<Arc<Shared>>,
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let Some(key) = path
        .strip_prefix(UPLOAD_BUCKET)
        .and_then(|k| k.strip_prefix('/'))
    else {
        return S3Error(
            StatusCode::NOT_FOUND,
            "NoSuchBucket",
            "The specified bucket does not exist",
        )
        .into_response();
    };
    let grant = match admitted(&shared, &method, key, query.as_deref()) {
        Ok(grant) => grant,
        Err(refused) => return refused.into_response(),
    };
    let answer = match (grant.method, grant.part) {
        ("PUT", None) => put(&shared, key, body),
        ("PUT", Some((upload, number))) => put_part(&shared, &upload, number, body),
        (_, Some(_)) => Err(S3Error(
            StatusCode::BAD_REQUEST,
            "InvalidRequest",
            "a part can only be uploaded",
        )),
        (method, None) => {
            let range = headers
                .get(header::RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(byte_range);
            get(&shared, key, method == "HEAD", range)
        }
    };
    answer.unwrap_or_else(IntoResponse::into_response)
}

fn etag_header(etag: &str) -> [(header::HeaderName, String); 1] {
    [(header::ETAG, format!("\"{etag}\""))]
}

fn put(shared: &Shared, key: &str, body: Bytes) -> Result<Response, S3Error> {
    let stored = Stored::of(body);
    let mut state = shared.lock();
    state.counts.bucket_put += 1;
    state.counts.bucket_bytes_in += stored.bytes.len() as u64;
    let etag = stored.etag.clone();
    state.bucket.objects.insert(key.to_string(), stored);
    Ok((StatusCode::OK, etag_header(&etag)).into_response())
}

fn no_upload() -> S3Error {
    S3Error(
        StatusCode::NOT_FOUND,
        "NoSuchUpload",
        "The specified upload does not exist.",
    )
}

fn put_part(shared: &Shared, upload: &str, number: u32, body: Bytes) -> Result<Response, S3Error> {
    if !(1..=10_000).contains(&number) {
        return Err(S3Error(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "Part number must be an integer between 1 and 10000, inclusive",
        ));
    }
    let stored = Stored::of(body);
    let mut state = shared.lock();
    state.counts.bucket_put += 1;
    state.counts.bucket_bytes_in += stored.bytes.len() as u64;
    let etag = stored.etag.clone();
    let upload = state.bucket.uploads.get_mut(upload).ok_or_else(no_upload)?;
    upload.parts.insert(number, stored);
    Ok((StatusCode::OK, etag_header(&etag)).into_response())
}

/// The first and last byte of a `Range: bytes=A-B` (or `A-`), as S3 takes
/// one range; anything else is ignored, as S3 ignores it.
fn byte_range(value: &str) -> Option<(u64, Option<u64>)> {
    let (first, last) = value.strip_prefix("bytes=")?.split_once('-')?;
    let first = first.trim().parse().ok()?;
    let last = match last.trim() {
        "" => None,
        last => Some(last.parse().ok()?),
    };
    Some((first, last))
}

fn get(
    shared: &Shared,
    key: &str,
    head: bool,
    range: Option<(u64, Option<u64>)>,
) -> Result<Response, S3Error> {
    let mut state = shared.lock();
    state.counts.bucket_get += 1;
    let stored = state.bucket.objects.get(key).cloned().ok_or(S3Error(
        StatusCode::NOT_FOUND,
        "NoSuchKey",
        "The specified key does not exist.",
    ))?;
    let headers = [
        (header::ETAG, format!("\"{}\"", stored.etag)),
        (header::CONTENT_LENGTH, stored.bytes.len().to_string()),
        (
            header::LAST_MODIFIED,
            httpdate::fmt_http_date(stored.created),
        ),
        (header::CONTENT_TYPE, "application/octet-stream".into()),
    ];
    if head {
        return Ok((StatusCode::OK, headers).into_response());
    }
    let len = stored.bytes.len() as u64;
    if let Some((first, last)) = range.filter(|(first, _)| *first < len) {
        let last = last.unwrap_or(len - 1).min(len - 1);
        let [etag, _, modified, kind] = headers;
        let part = Bytes::copy_from_slice(&stored.bytes[first as usize..=last as usize]);
        state.counts.data_bytes += part.len() as u64;
        let ranged = [
            etag,
            (header::CONTENT_LENGTH, part.len().to_string()),
            (header::CONTENT_RANGE, format!("bytes {first}-{last}/{len}")),
            modified,
            kind,
        ];
        return Ok((StatusCode::PARTIAL_CONTENT, ranged, part).into_response());
    }
    state.counts.data_bytes += stored.bytes.len() as u64;
    Ok((StatusCode::OK, headers, Bytes::from(stored.bytes.to_vec())).into_response())
}

/// Begins a multipart upload of `key`; its upload id.
pub(crate) fn begin(bucket: &mut Bucket, key: &str) -> String {
    let upload = hex::encode(rand::random::<[u8; 16]>());
    let begun = Upload {
        key: key.to_string(),
        parts: BTreeMap::new(),
    };
    bucket.uploads.insert(upload.clone(), begun);
    upload
}

/// Why a completion was refused: S3's code and message.
#[derive(Debug)]
pub(crate) struct Refused(pub &'static str, pub &'static str);

/// Completes `upload` of `key` from `parts` (number, ETag as sent, quotes
/// or not); the object's ETag. As S3: every part named must be held with
/// that ETag, in ascending order, and all but the last of 5 MiB at least.
pub(crate) fn complete(
    bucket: &mut Bucket,
    key: &str,
    upload: &str,
    parts: &[(u32, String)],
) -> Result<String, Refused> {
    let begun = bucket
        .uploads
        .get(upload)
        .filter(|u| u.key == key)
        .ok_or(Refused(
            "NoSuchUpload",
            "The specified upload does not exist.",
        ))?;
    if parts.is_empty() {
        return Err(Refused(
            "MalformedXML",
            "You must specify at least one part",
        ));
    }
    if parts.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(Refused(
            "InvalidPartOrder",
            "The list of parts was not in ascending order.",
        ));
    }
    let mut chosen = Vec::with_capacity(parts.len());
    for (number, etag) in parts {
        let held = begun
            .parts
            .get(number)
            .filter(|p| p.etag == etag.trim_matches('"'))
            .ok_or(Refused(
                "InvalidPart",
                "One or more of the specified parts could not be found.",
            ))?;
        chosen.push(held);
    }
    if chosen[..chosen.len() - 1]
        .iter()
        .any(|p| p.bytes.len() < MIN_PART)
    {
        return Err(Refused(
            "EntityTooSmall",
            "Your proposed upload is smaller than the minimum allowed object size.",
        ));
    }
    let mut md5s = Md5::new();
    let mut bytes = Vec::new();
    for part in &chosen {
        md5s.update(Md5::digest(&part.bytes));
        bytes.extend_from_slice(&part.bytes);
    }
    let etag = format!("{}-{}", hex::encode(md5s.finalize()), chosen.len());
    let object = Stored {
        bytes: Arc::from(bytes),
        etag: etag.clone(),
        created: SystemTime::now(),
    };
    bucket.uploads.remove(upload);
    bucket.objects.insert(key.to_string(), object);
    Ok(etag)
}
