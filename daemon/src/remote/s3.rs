use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use reqwest::{RequestBuilder, Response, StatusCode};
use rusty_s3::{Bucket, S3Action, UrlStyle};
use tokio::io::AsyncReadExt;

use super::{RemoteError, S3Credentials};

/// How long a presigned request stays valid: long enough for one slow part.
const SIGN_FOR: Duration = Duration::from_secs(3600);

/// Bounded retries with doubling delays, for 5xx, 429, timeouts and refused
/// connections; a 4xx other than 429 is final at once.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub attempts: u32,
    pub first_delay: Duration,
}

impl Default for Retry {
    fn default() -> Retry {
        Retry {
            attempts: 5,
            first_delay: Duration::from_millis(200),
        }
    }
}

/// Where the S3 API is and how to address it.
#[derive(Debug, Clone)]
pub struct S3Config {
    pub endpoint: url::Url,
    pub region: String,
    /// `http://host/bucket/key` (Ceph RGW, MinIO) rather than `bucket.host`.
    pub path_style: bool,
    pub retry: Retry,
    pub timeout: Duration,
}

impl S3Config {
    /// From `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` (path-style when set,
    /// as RGW wants) and `AWS_REGION` / `AWS_DEFAULT_REGION`.
    pub fn from_env() -> Result<S3Config, RemoteError> {
        let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
        let custom = var("AWS_ENDPOINT_URL_S3").or_else(|| var("AWS_ENDPOINT_URL"));
        let text = custom
            .clone()
            .unwrap_or_else(|| "https://s3.amazonaws.com".into());
        let endpoint = url::Url::parse(&text).map_err(|e| RemoteError::BadUrl {
            url: text.clone(),
            why: format!("S3 endpoint: {e}"),
        })?;
        Ok(S3Config {
            endpoint,
            region: var("AWS_REGION")
                .or_else(|| var("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|| "us-east-1".into()),
            path_style: custom.is_some(),
            retry: Retry::default(),
            timeout: Duration::from_secs(60),
        })
    }
}

/// What a HEAD tells about an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub size: u64,
    /// Without its quotes; `None` when the store sent none (or an empty one).
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub version_id: Option<String>,
    /// The content sha256 (hex) as the store states it: the `x-amz-meta-sha256`
    /// we attach to what we upload; from `head_checksummed` and HTTPS HEADs
    /// also a full-object checksum header (`checksum.rs`).
    pub sha256: Option<String>,
}

/// The metadata header our uploads carry: the content oid.
pub const SHA256_META: &str = "x-amz-meta-sha256";

/// What a conditional PUT did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutOutcome {
    Stored {
        etag: Option<String>,
    },
    /// The key was taken; the object there is unchanged.
    Exists,
}

/// An S3 client over presigned requests.
pub struct S3Client {
    config: S3Config,
    creds: S3Credentials,
    http: reqwest::Client,
}

impl S3Client {
    pub fn new(config: S3Config, creds: S3Credentials) -> Result<S3Client, RemoteError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(config.timeout)
            .build()
            .map_err(|e| RemoteError::Protocol {
                op: "configure",
                object: config.endpoint.to_string(),
                why: chain(&e),
            })?;
        Ok(S3Client {
            config,
            creds,
            http,
        })
    }

    pub fn credentials(&self) -> &S3Credentials {
        &self.creds
    }

    fn bucket(&self, name: &str) -> Result<Bucket, RemoteError> {
        let style = if self.config.path_style {
            UrlStyle::Path
        } else {
            UrlStyle::VirtualHost
        };
        Bucket::new(
            self.config.endpoint.clone(),
            style,
            name.to_string(),
            self.config.region.clone(),
        )
        .map_err(|e| RemoteError::BadUrl {
            url: format!("s3://{name}"),
            why: e.to_string(),
        })
    }

    pub async fn create_bucket(&self, bucket: &str) -> Result<(), RemoteError> {
        let b = self.bucket(bucket)?;
        let keys = self.keys("create bucket", &format!("s3://{bucket}"))?;
        let url = b.create_bucket(keys).sign(SIGN_FOR);
        let object = format!("s3://{bucket}");
        self.send("create bucket", &object, &[StatusCode::CONFLICT], || {
            self.http.put(url.clone())
        })
        .await?;
        Ok(())
    }

    /// The object's metadata, or `None` when it does not exist.
    pub async fn head(&self, bucket: &str, key: &str) -> Result<Option<ObjectMeta>, RemoteError> {
        let b = self.bucket(bucket)?;
        let url = b.head_object(self.creds.keys.as_ref(), key).sign(SIGN_FOR);
        let object = format!("s3://{bucket}/{key}");
        let resp = self
            .send("HEAD", &object, &[StatusCode::NOT_FOUND], || {
                self.http.head(url.clone())
            })
            .await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        meta(&resp, "HEAD", &object).map(Some)
    }

    /// A HEAD that also asks for the store's checksum of the object
    /// (`x-amz-checksum-mode: ENABLED`, signed), so `sha256` is filled from
    /// a full-object SHA-256 checksum when there is no `x-amz-meta-sha256`
    /// (see `checksum.rs`). Stores without checksums ignore the header.
    pub async fn head_checksummed(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<ObjectMeta>, RemoteError> {
        let b = self.bucket(bucket)?;
        let mut action = b.head_object(self.creds.keys.as_ref(), key);
        action
            .headers_mut()
            .insert("x-amz-checksum-mode", "ENABLED");
        let url = action.sign(SIGN_FOR);
        let object = format!("s3://{bucket}/{key}");
        let resp = self
            .send("HEAD", &object, &[StatusCode::NOT_FOUND], || {
                self.http
                    .head(url.clone())
                    .header("x-amz-checksum-mode", "ENABLED")
            })
            .await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let mut found = meta(&resp, "HEAD", &object)?;
        found.sha256 = super::checksum::content_sha256(resp.headers());
        Ok(Some(found))
    }

    /// A GET of the object or of `range` of it, ready to stream.
    pub async fn get(
        &self,
        bucket: &str,
        key: &str,
        range: Option<Range<u64>>,
    ) -> Result<Response, RemoteError> {
        self.get_if(bucket, key, range, None).await
    }

    /// A GET that fails with HTTP 412 unless the object still has `etag`.
    pub async fn get_if(
        &self,
        bucket: &str,
        key: &str,
        range: Option<Range<u64>>,
        etag: Option<&str>,
    ) -> Result<Response, RemoteError> {
        let b = self.bucket(bucket)?;
        let url = b.get_object(self.creds.keys.as_ref(), key).sign(SIGN_FOR);
        let object = format!("s3://{bucket}/{key}");
        self.send("GET", &object, &[], || {
            ranged_if(self.http.get(url.clone()), range.as_ref(), etag)
        })
        .await
    }

    /// The whole body of a GET, refused when shorter than its Content-Length.
    pub async fn get_bytes(
        &self,
        bucket: &str,
        key: &str,
        range: Option<Range<u64>>,
    ) -> Result<Vec<u8>, RemoteError> {
        let object = format!("s3://{bucket}/{key}");
        let resp = self.get(bucket, key, range).await?;
        let want = resp.content_length();
        let body = resp
            .bytes()
            .await
            .map_err(|e| transport("GET", &object, 1, &e))?;
        if want.is_some_and(|n| n != body.len() as u64) {
            return Err(RemoteError::Protocol {
                op: "GET",
                object,
                why: format!(
                    "body truncated: {} of {} bytes",
                    body.len(),
                    want.unwrap_or(0)
                ),
            });
        }
        Ok(body.to_vec())
    }

    /// A single PUT; returns the ETag.
    pub async fn put(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
    ) -> Result<Option<String>, RemoteError> {
        self.put_with(bucket, key, body, &[]).await
    }

    /// A single PUT carrying `headers` (signed, e.g. `x-amz-meta-*`).
    pub async fn put_with(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        headers: &[(&str, &str)],
    ) -> Result<Option<String>, RemoteError> {
        let resp = self.put_object(bucket, key, body, headers, &[]).await?;
        Ok(etag(&resp))
    }

    /// A single PUT that lands only where the key is free (`If-None-Match: *`):
    /// one request for a new object, and one that exists is left alone.
    pub async fn put_if_absent(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        headers: &[(&str, &str)],
    ) -> Result<PutOutcome, RemoteError> {
        let mut all = headers.to_vec();
        all.push(("if-none-match", "*"));
        let resp = self
            .put_object(bucket, key, body, &all, &[StatusCode::PRECONDITION_FAILED])
            .await?;
        Ok(match resp.status() {
            StatusCode::PRECONDITION_FAILED => PutOutcome::Exists,
            _ => PutOutcome::Stored { etag: etag(&resp) },
        })
    }

    async fn put_object(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        headers: &[(&str, &str)],
        accept: &[StatusCode],
    ) -> Result<Response, RemoteError> {
        let b = self.bucket(bucket)?;
        let mut action = b.put_object(self.creds.keys.as_ref(), key);
        for (k, v) in headers {
            action.headers_mut().insert(*k, *v);
        }
        let url = action.sign(SIGN_FOR);
        let object = format!("s3://{bucket}/{key}");
        self.send("PUT", &object, accept, || {
            with_headers(self.http.put(url.clone()), headers).body(body.clone())
        })
        .await
    }

    /// A server-side copy of `src_bucket/src_key` to `bucket/key` with
    /// `headers` as its new metadata: no byte crosses this machine. Objects
    /// up to 5 GiB (S3's limit for one CopyObject); returns the copy's metadata.
    pub async fn copy(
        &self,
        src_bucket: &str,
        src_key: &str,
        bucket: &str,
        key: &str,
        headers: &[(&str, &str)],
    ) -> Result<ObjectMeta, RemoteError> {
        let object = format!("s3://{bucket}/{key}");
        let source = format!("/{src_bucket}/{}", encode_key(src_key));
        let mut all = headers.to_vec();
        all.push(("x-amz-copy-source", source.as_str()));
        all.push(("x-amz-metadata-directive", "REPLACE"));
        let b = self.bucket(bucket)?;
        let mut action = b.put_object(self.creds.keys.as_ref(), key);
        for (k, v) in &all {
            action.headers_mut().insert(*k, *v);
        }
        let url = action.sign(SIGN_FOR);
        let resp = self
            .send("copy", &object, &[], || {
                with_headers(self.http.put(url.clone()), &all)
            })
            .await?;
        // S3 may answer a failed copy with 200 and an error in the body.
        let text = resp
            .text()
            .await
            .map_err(|e| transport("copy", &object, 1, &e))?;
        if text.contains("<Error>") {
            return Err(RemoteError::Protocol {
                op: "copy",
                object,
                why: format!("the store refused it: {}", error_code(&text)),
            });
        }
        self.head(bucket, key).await?.ok_or(RemoteError::Protocol {
            op: "HEAD after copy",
            object,
            why: "the object is not there".into(),
        })
    }

    /// Uploads the file at `path` in parts of exactly `part_size` bytes (the
    /// last one shorter), so the same file always gets the same ETag; then
    /// HEADs the object for its real ETag (RGW answers the completion with
    /// an empty one). An upload that fails is aborted, leaving nothing.
    pub async fn put_multipart(
        &self,
        bucket: &str,
        key: &str,
        path: &Path,
        part_size: u64,
        headers: &[(&str, &str)],
    ) -> Result<ObjectMeta, RemoteError> {
        let object = format!("s3://{bucket}/{key}");
        let b = self.bucket(bucket)?;
        let mut action = b.create_multipart_upload(self.creds.keys.as_ref(), key);
        for (k, v) in headers {
            action.headers_mut().insert(*k, *v);
        }
        let url = action.sign(SIGN_FOR);
        let resp = self
            .send("start upload", &object, &[], || {
                with_headers(self.http.post(url.clone()), headers)
            })
            .await?;
        let text = resp
            .text()
            .await
            .map_err(|e| transport("start upload", &object, 1, &e))?;
        let created =
            rusty_s3::actions::CreateMultipartUpload::parse_response(&text).map_err(|e| {
                RemoteError::Protocol {
                    op: "start upload",
                    object: object.clone(),
                    why: format!("unreadable answer: {e}"),
                }
            })?;
        let upload_id = created.upload_id().to_string();
        let done = self
            .upload_parts(&b, &object, key, &upload_id, path, part_size)
            .await;
        let etags = match done {
            Ok(etags) => etags,
            Err(e) => {
                let abort = b.abort_multipart_upload(self.creds.keys.as_ref(), key, &upload_id);
                let url = abort.sign(SIGN_FOR);
                let _ = self.http.delete(url).send().await; // best effort: the error below matters
                return Err(e);
            }
        };
        let complete = b.complete_multipart_upload(
            self.creds.keys.as_ref(),
            key,
            &upload_id,
            etags.iter().map(String::as_str),
        );
        let url = complete.sign(SIGN_FOR);
        let body = complete.body();
        let resp = self
            .send("complete upload", &object, &[], || {
                self.http.post(url.clone()).body(body.clone())
            })
            .await?;
        let text = resp
            .text()
            .await
            .map_err(|e| transport("complete upload", &object, 1, &e))?;
        if text.contains("<Error>") {
            return Err(RemoteError::Protocol {
                op: "complete upload",
                object,
                why: format!("the store refused it: {}", error_code(&text)),
            });
        }
        self.head(bucket, key).await?.ok_or(RemoteError::Protocol {
            op: "HEAD after upload",
            object,
            why: "the object is not there".into(),
        })
    }

    async fn upload_parts(
        &self,
        b: &Bucket,
        object: &str,
        key: &str,
        upload_id: &str,
        path: &Path,
        part_size: u64,
    ) -> Result<Vec<String>, RemoteError> {
        let io_err = |e: std::io::Error| RemoteError::Protocol {
            op: "upload",
            object: object.to_string(),
            why: format!("reading {}: {e}", path.display()),
        };
        let mut file = tokio::fs::File::open(path).await.map_err(io_err)?;
        let mut etags = Vec::new();
        for number in 1u16.. {
            let mut part = Vec::with_capacity(part_size as usize);
            (&mut file)
                .take(part_size)
                .read_to_end(&mut part)
                .await
                .map_err(io_err)?;
            if part.is_empty() && number > 1 {
                break;
            }
            let part = Bytes::from(part);
            let url = b
                .upload_part(self.creds.keys.as_ref(), key, number, upload_id)
                .sign(SIGN_FOR);
            let resp = self
                .send("upload part", object, &[], || {
                    self.http.put(url.clone()).body(part.clone())
                })
                .await?;
            etags.push(etag(&resp).ok_or_else(|| RemoteError::Protocol {
                op: "upload part",
                object: object.to_string(),
                why: format!("part {number} came back without an ETag"),
            })?);
            if (part.len() as u64) < part_size {
                break;
            }
        }
        Ok(etags)
    }

    pub async fn delete(&self, bucket: &str, key: &str) -> Result<(), RemoteError> {
        let b = self.bucket(bucket)?;
        let url = b
            .delete_object(self.creds.keys.as_ref(), key)
            .sign(SIGN_FOR);
        let object = format!("s3://{bucket}/{key}");
        self.send("DELETE", &object, &[StatusCode::NOT_FOUND], || {
            self.http.delete(url.clone())
        })
        .await?;
        Ok(())
    }

    fn keys(&self, op: &'static str, object: &str) -> Result<&rusty_s3::Credentials, RemoteError> {
        self.creds.keys.as_ref().ok_or_else(|| RemoteError::Auth {
            op,
            object: object.into(),
            status: 0,
            code: ": no credentials".into(),
            source_: self.creds.source.to_string(),
        })
    }

    /// Sends with bounded retries. Success and the statuses in `accept` come
    /// back as responses; everything else becomes an error naming `object`.
    async fn send(
        &self,
        op: &'static str,
        object: &str,
        accept: &[StatusCode],
        make: impl Fn() -> RequestBuilder,
    ) -> Result<Response, RemoteError> {
        match send_retrying(self.config.retry, accept, make).await {
            Sent::Answered(resp) => Ok(resp),
            Sent::Refused { resp, attempt } => {
                Err(self.status_error(op, object, attempt, resp).await)
            }
            Sent::Failed { error, attempt } => Err(transport(op, object, attempt, &error)),
        }
    }

    async fn status_error(
        &self,
        op: &'static str,
        object: &str,
        attempt: u32,
        resp: Response,
    ) -> RemoteError {
        let status = resp.status();
        let code = match resp.text().await {
            Ok(text) if text.contains("<Code>") => format!(" {}", error_code(&text)),
            _ => String::new(),
        };
        if matches!(status, StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED) {
            return RemoteError::Auth {
                op,
                object: object.into(),
                status: status.as_u16(),
                code,
                source_: self.creds.source.to_string(),
            };
        }
        RemoteError::Http {
            op,
            object: object.into(),
            status: status.as_u16(),
            code,
            tries: if attempt > 1 {
                format!(" (after {attempt} attempts)")
            } else {
                String::new()
            },
        }
    }
}

/// How a request ended after [`send_retrying`].
pub(super) enum Sent {
    /// A success, or one of the statuses the caller accepts.
    Answered(Response),
    /// Any other status, after `attempt` tries.
    Refused { resp: Response, attempt: u32 },
    /// No answer (connect, timeout, ...), after `attempt` tries.
    Failed { error: reqwest::Error, attempt: u32 },
}

/// Sends `make()` until it is answered, with bounded retries and doubling
/// delays for 5xx, 429, 408, timeouts and refused connections.
pub(super) async fn send_retrying(
    retry: Retry,
    accept: &[StatusCode],
    make: impl Fn() -> RequestBuilder,
) -> Sent {
    let mut delay = retry.first_delay;
    for attempt in 1..=retry.attempts.max(1) {
        let last = attempt >= retry.attempts;
        match make().send().await {
            Ok(resp) if resp.status().is_success() || accept.contains(&resp.status()) => {
                return Sent::Answered(resp)
            }
            Ok(resp) if retryable(resp.status()) && !last => {}
            Ok(resp) => return Sent::Refused { resp, attempt },
            Err(e) if (e.is_timeout() || e.is_connect() || e.is_request()) && !last => {}
            Err(error) => return Sent::Failed { error, attempt },
        }
        tokio::time::sleep(delay).await;
        delay *= 2;
    }
    unreachable!("the last attempt returns")
}

/// A GET of `range` only (when given), failing with HTTP 412 unless the
/// object still has `etag` (when given).
pub(super) fn ranged_if(
    mut req: RequestBuilder,
    range: Option<&Range<u64>>,
    etag: Option<&str>,
) -> RequestBuilder {
    if let Some(r) = range {
        req = req.header("range", format!("bytes={}-{}", r.start, r.end - 1));
    }
    if let Some(tag) = etag {
        req = req.header("if-match", format!("\"{tag}\""));
    }
    req
}

fn with_headers(mut req: RequestBuilder, headers: &[(&str, &str)]) -> RequestBuilder {
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req
}

fn retryable(status: StatusCode) -> bool {
    status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
}

/// The error and its causes, without the request URL (it carries the signature).
pub(super) fn chain(e: &reqwest::Error) -> String {
    let mut out = String::new();
    let mut cur: Option<&dyn std::error::Error> = Some(e);
    let mut first = true;
    while let Some(err) = cur {
        let text = if first {
            // reqwest prints "... for url (...)": keep what comes before.
            let t = err.to_string();
            t.split(" for url").next().unwrap_or("").to_string()
        } else {
            err.to_string()
        };
        if !text.is_empty() && !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        first = false;
        cur = err.source();
    }
    out
}

pub(super) fn transport(
    op: &'static str,
    object: &str,
    attempts: u32,
    e: &reqwest::Error,
) -> RemoteError {
    RemoteError::Transport {
        op,
        object: object.into(),
        attempts,
        why: chain(e),
    }
}

fn error_code(xml: &str) -> String {
    xml.split("<Code>")
        .nth(1)
        .and_then(|s| s.split("</Code>").next())
        .unwrap_or("unknown error")
        .to_string()
}

pub(super) fn header(resp: &Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

pub(super) fn etag(resp: &Response) -> Option<String> {
    header(resp, "etag")
        .map(|e| e.trim_matches('"').to_string())
        .filter(|e| !e.is_empty())
}

fn meta(resp: &Response, op: &'static str, object: &str) -> Result<ObjectMeta, RemoteError> {
    let size = header(resp, "content-length")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| RemoteError::Protocol {
            op,
            object: object.into(),
            why: "no Content-Length".into(),
        })?;
    Ok(ObjectMeta {
        size,
        etag: etag(resp),
        last_modified: header(resp, "last-modified"),
        version_id: header(resp, "x-amz-version-id"),
        sha256: header(resp, SHA256_META),
    })
}

/// A key as `x-amz-copy-source` wants it: each path segment percent-encoded.
fn encode_key(key: &str) -> String {
    key.split('/')
        .map(|seg| {
            url::form_urlencoded::byte_serialize(seg.as_bytes())
                .collect::<String>()
                .replace('+', "%20")
        })
        .collect::<Vec<_>>()
        .join("/")
}
