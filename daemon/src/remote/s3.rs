use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use reqwest::{RequestBuilder, Response, StatusCode};
use rusty_s3::{Bucket, S3Action, UrlStyle};
use tokio::io::AsyncReadExt;

use super::{MultipartUpload, Permanence, RemoteError, S3Credentials, UploadJournal};

/// How long a presigned request stays valid: long enough for one slow part.
const SIGN_FOR: Duration = Duration::from_secs(3600);

/// Parts copied at once by [`S3Client::copy_in_parts`]: each is a server-side
/// copy, so a few keep the store busy without piling up requests.
const COPY_PARTS_AT_ONCE: usize = 4;

/// Where the parts of a multipart upload come from.
enum Parts<'a> {
    File(&'a Path),
    Copy(&'a CopySource<'a>),
}

/// The object a server-side copy reads, pinned to the version seen when it
/// was added when `etag` is set: a source changed since fails the copy
/// with 412 and nothing is written (see [`pin_headers`] and
/// `S3Client::still_pinned` for how RGW is held to it).
#[derive(Debug, Clone, Copy)]
pub struct CopySource<'a> {
    pub bucket: &'a str,
    pub key: &'a str,
    pub etag: Option<&'a str>,
    pub size: u64,
}

impl CopySource<'_> {
    /// The `x-amz-copy-source` header: `/bucket/key`, the key URL-encoded.
    fn header(&self) -> String {
        format!("/{}/{}", self.bucket, encode_key(self.key))
    }
}

/// Bounded retries with doubling delays, for what [`Permanence`] calls
/// transient (5xx, 429, 408, timeouts, refused connections); anything
/// permanent (another 4xx, an unknown host, TLS to a plain port) is final at
/// once.
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
    /// Where multipart uploads are recorded while in flight.
    journal: Option<Arc<dyn UploadJournal>>,
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
            journal: None,
        })
    }

    /// Records each multipart upload in `journal` from before its first
    /// part until it is completed or aborted.
    pub fn with_journal(mut self, journal: Arc<dyn UploadJournal>) -> S3Client {
        self.journal = Some(journal);
        self
    }

    /// The endpoint, as multipart uploads are recorded with it.
    pub fn endpoint(&self) -> &str {
        self.config.endpoint.as_str()
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

    /// A server-side copy of `src` to `bucket/key` with `headers` as its new
    /// metadata: no byte crosses this machine. One CopyObject, so up to 5 GiB
    /// (S3's limit; see [`S3Client::copy_in_parts`] past it). Returns the
    /// copy's metadata.
    pub async fn copy(
        &self,
        src: &CopySource<'_>,
        bucket: &str,
        key: &str,
        headers: &[(&str, &str)],
    ) -> Result<ObjectMeta, RemoteError> {
        let object = format!("s3://{bucket}/{key}");
        let source = src.header();
        let mut all = headers.to_vec();
        all.push(("x-amz-copy-source", source.as_str()));
        all.push(("x-amz-metadata-directive", "REPLACE"));
        if let Some(tag) = src.etag {
            all.extend(pin_headers(tag));
        }
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
        refused_in_body("copy", &object, resp).await?;
        self.head_after("copy", bucket, key).await
    }

    /// A server-side copy in parts of `part_size` bytes (UploadPartCopy, a
    /// few at a time), for objects past what one CopyObject may copy. The
    /// copy's ETag is then `-N`, as if uploaded in parts of that size.
    pub async fn copy_in_parts(
        &self,
        src: &CopySource<'_>,
        bucket: &str,
        key: &str,
        part_size: u64,
        headers: &[(&str, &str)],
    ) -> Result<ObjectMeta, RemoteError> {
        self.multipart(bucket, key, Parts::Copy(src), part_size, headers)
            .await
    }

    async fn copy_parts(
        &self,
        b: &Bucket,
        object: &str,
        key: &str,
        upload_id: &str,
        src: &CopySource<'_>,
        part_size: u64,
    ) -> Result<Vec<String>, RemoteError> {
        let part_size = part_size.max(1);
        let source = src.header();
        let ranges = (0..src.size)
            .step_by(part_size as usize)
            .map(|from| from..(from + part_size).min(src.size));
        let parts = stream::iter(ranges.zip(1u16..))
            .map(|(range, number)| {
                let mut headers = vec![
                    ("x-amz-copy-source", source.clone()),
                    (
                        "x-amz-copy-source-range",
                        format!("bytes={}-{}", range.start, range.end - 1),
                    ),
                ];
                if let Some(tag) = src.etag {
                    headers.extend(pin_headers(tag).map(|(k, v)| (k, v.to_string())));
                }
                self.copy_part(b, object, key, upload_id, number, headers)
            })
            .buffered(COPY_PARTS_AT_ONCE)
            .try_collect::<Vec<String>>()
            .await?;
        self.still_pinned(src, object).await?;
        Ok(parts)
    }

    /// Whether `src` still has the pinned ETag once its parts are copied.
    /// RGW (through Pacific at least) ignores the copy conditions on
    /// UploadPartCopy; a source changed meanwhile shows here instead, and
    /// fails the copy as a 412 would.
    async fn still_pinned(&self, src: &CopySource<'_>, object: &str) -> Result<(), RemoteError> {
        let Some(pinned) = src.etag else {
            return Ok(());
        };
        let now = self.head(src.bucket, src.key).await?;
        if now.as_ref().and_then(|m| m.etag.as_deref()) == Some(pinned) {
            return Ok(());
        }
        Err(RemoteError::Http {
            op: "copy part",
            object: object.to_string(),
            status: 412,
            code: format!(
                " (s3://{}/{} is no longer ETag {pinned})",
                src.bucket, src.key
            ),
            tries: String::new(),
        })
    }

    async fn copy_part(
        &self,
        b: &Bucket,
        object: &str,
        key: &str,
        upload_id: &str,
        number: u16,
        headers: Vec<(&'static str, String)>,
    ) -> Result<String, RemoteError> {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut action = b.upload_part(self.creds.keys.as_ref(), key, number, upload_id);
        for (k, v) in &headers {
            action.headers_mut().insert(*k, *v);
        }
        let url = action.sign(SIGN_FOR);
        let resp = self
            .send("copy part", object, &[], || {
                // RGW wants a Content-Length, and an empty body sends none.
                with_headers(self.http.put(url.clone()), &headers).header("content-length", "0")
            })
            .await?;
        let text = refused_in_body("copy part", object, resp).await?;
        xml_etag(&text).ok_or_else(|| RemoteError::Protocol {
            op: "copy part",
            object: object.to_string(),
            why: format!("part {number} came back without an ETag"),
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
        self.multipart(bucket, key, Parts::File(path), part_size, headers)
            .await
    }

    /// A multipart upload of `bucket/key` with `headers` as its metadata,
    /// its parts sent or copied; aborted when a part fails.
    async fn multipart(
        &self,
        bucket: &str,
        key: &str,
        from: Parts<'_>,
        part_size: u64,
        headers: &[(&str, &str)],
    ) -> Result<ObjectMeta, RemoteError> {
        let object = format!("s3://{bucket}/{key}");
        let b = self.bucket(bucket)?;
        let upload_id = self.start_upload(&b, &object, key, headers).await?;
        let upload = MultipartUpload {
            endpoint: self.endpoint().to_string(),
            bucket: bucket.to_string(),
            key: key.to_string(),
            upload_id,
        };
        // Recorded before the first part: a daemon killed from here on
        // leaves a record, and its next start aborts the upload.
        if let Some(journal) = &self.journal {
            if let Err(source) = journal.started(&upload) {
                let _ = self.abort_upload(bucket, key, &upload.upload_id).await;
                return Err(RemoteError::Unrecorded { object, source });
            }
        }
        let id = upload.upload_id.as_str();
        let parts = match from {
            Parts::File(path) => {
                self.upload_parts(&b, &object, key, id, path, part_size)
                    .await
            }
            Parts::Copy(src) => self.copy_parts(&b, &object, key, id, src, part_size).await,
        };
        let finished = self.finish_upload(&b, &object, key, id, parts).await;
        // Completed, or failed: then aborted, unless the store could not be
        // told (the record stays, for the next start to abort it).
        let over = match &finished {
            Ok(()) => true,
            Err(_) => self.abort_upload(bucket, key, id).await.is_ok(),
        };
        if let (true, Some(journal)) = (over, &self.journal) {
            journal.ended(&upload);
        }
        finished?;
        self.head_after("upload", bucket, key).await
    }

    /// AbortMultipartUpload; an upload the store does not know (completed,
    /// aborted, expired) counts as aborted.
    pub async fn abort_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<(), RemoteError> {
        let object = format!("s3://{bucket}/{key}");
        let b = self.bucket(bucket)?;
        let keys = self.keys("abort upload", &object)?;
        let url = b
            .abort_multipart_upload(Some(keys), key, upload_id)
            .sign(SIGN_FOR);
        self.send("abort upload", &object, &[StatusCode::NOT_FOUND], || {
            self.http.delete(url.clone())
        })
        .await?;
        Ok(())
    }

    /// The multipart uploads in progress in `bucket` under `prefix`, as
    /// `(key, upload id)` (ListMultipartUploads, first 1,000).
    pub async fn list_uploads(
        &self,
        bucket: &str,
        prefix: &str,
    ) -> Result<Vec<(String, String)>, RemoteError> {
        let object = format!("s3://{bucket}/{prefix}");
        let b = self.bucket(bucket)?;
        let keys = self.keys("list uploads", &object)?;
        // rusty-s3 has no ListMultipartUploads: a bucket GET signed with
        // `?uploads` instead of ListObjectsV2's query.
        let mut action = b.list_objects_v2(Some(keys));
        let query = action.query_mut();
        query.remove("list-type");
        query.remove("encoding-type");
        query.insert("uploads", "");
        query.insert("prefix", prefix.to_string());
        let url = action.sign(SIGN_FOR);
        let resp = self
            .send("list uploads", &object, &[], || self.http.get(url.clone()))
            .await?;
        let text = resp
            .text()
            .await
            .map_err(|e| transport("list uploads", &object, 1, &e))?;
        Ok(xml_uploads(&text))
    }

    /// CreateMultipartUpload with `headers` as the object's metadata.
    async fn start_upload(
        &self,
        b: &Bucket,
        object: &str,
        key: &str,
        headers: &[(&str, &str)],
    ) -> Result<String, RemoteError> {
        let mut action = b.create_multipart_upload(self.creds.keys.as_ref(), key);
        for (k, v) in headers {
            action.headers_mut().insert(*k, *v);
        }
        let url = action.sign(SIGN_FOR);
        let resp = self
            .send("start upload", object, &[], || {
                with_headers(self.http.post(url.clone()), headers)
            })
            .await?;
        let text = resp
            .text()
            .await
            .map_err(|e| transport("start upload", object, 1, &e))?;
        let created =
            rusty_s3::actions::CreateMultipartUpload::parse_response(&text).map_err(|e| {
                RemoteError::Protocol {
                    op: "start upload",
                    object: object.to_string(),
                    why: format!("unreadable answer: {e}"),
                }
            })?;
        Ok(created.upload_id().to_string())
    }

    /// Completes the upload with the parts' ETags, or aborts it when sending
    /// them failed, so a failure leaves nothing behind; then HEADs the result.
    async fn finish_upload(
        &self,
        b: &Bucket,
        object: &str,
        key: &str,
        upload_id: &str,
        parts: Result<Vec<String>, RemoteError>,
    ) -> Result<(), RemoteError> {
        let etags = parts?;
        let complete = b.complete_multipart_upload(
            self.creds.keys.as_ref(),
            key,
            upload_id,
            etags.iter().map(String::as_str),
        );
        let url = complete.sign(SIGN_FOR);
        let body = complete.body();
        let resp = self
            .send("complete upload", object, &[], || {
                self.http.post(url.clone()).body(body.clone())
            })
            .await?;
        refused_in_body("complete upload", object, resp).await?;
        Ok(())
    }

    /// The object's metadata right after `what` wrote it.
    async fn head_after(
        &self,
        what: &'static str,
        bucket: &str,
        key: &str,
    ) -> Result<ObjectMeta, RemoteError> {
        self.head(bucket, key).await?.ok_or(RemoteError::Protocol {
            op: what,
            object: format!("s3://{bucket}/{key}"),
            why: "the object is not there afterwards".into(),
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
/// delays for what [`Permanence`] calls transient; a permanent failure
/// returns at once.
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
            Err(e) if Permanence::of_transport(&e) == Permanence::Transient && !last => {}
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
    Permanence::of_status(status.as_u16()) == Permanence::Transient
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
        permanence: Permanence::of_transport(e),
    }
}

/// The conditions that pin a copy's source to `etag`: S3's header, and the
/// one Ceph RGW's CopyObject reads (through Pacific at least, it ignores
/// the first there).
fn pin_headers(etag: &str) -> [(&'static str, &str); 2] {
    [
        ("x-amz-copy-source-if-match", etag),
        ("x-amz-copy-if-match", etag),
    ]
}

/// S3 may answer a copy or a completion with 200 and an error in the body.
async fn refused_in_body(
    op: &'static str,
    object: &str,
    resp: Response,
) -> Result<String, RemoteError> {
    let text = resp
        .text()
        .await
        .map_err(|e| transport(op, object, 1, &e))?;
    if text.contains("<Error>") {
        return Err(RemoteError::Protocol {
            op,
            object: object.to_string(),
            why: format!("the store refused it: {}", error_code(&text)),
        });
    }
    Ok(text)
}

/// The `(Key, UploadId)` of each `<Upload>` of a ListMultipartUploadsResult.
fn xml_uploads(xml: &str) -> Vec<(String, String)> {
    let field = |upload: &str, name: &str| {
        let text = upload
            .split(&format!("<{name}>"))
            .nth(1)?
            .split(&format!("</{name}>"))
            .next()?;
        Some(
            text.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&amp;", "&"),
        )
    };
    xml.split("<Upload>")
        .skip(1)
        .filter_map(|u| {
            let upload = u.split("</Upload>").next()?;
            Some((field(upload, "Key")?, field(upload, "UploadId")?))
        })
        .collect()
}

/// The `<ETag>` of a CopyPartResult, unquoted.
fn xml_etag(xml: &str) -> Option<String> {
    let tag = xml.split("<ETag>").nth(1)?.split("</ETag>").next()?;
    let tag = tag.replace("&quot;", "\"").replace("&#34;", "\"");
    Some(tag.trim().trim_matches('"').to_string()).filter(|t| !t.is_empty())
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

/// The object's size from a HEAD's `Content-Length`: present, a number,
/// and no larger than [`crate::MAX_OBJECT_SIZE`].
pub(super) fn head_size(
    resp: &Response,
    op: &'static str,
    object: &str,
) -> Result<u64, RemoteError> {
    let bad = |why: String| RemoteError::Protocol {
        op,
        object: object.into(),
        why,
    };
    let Some(text) = header(resp, "content-length") else {
        return Err(bad("no Content-Length: the object's size is unknown".into()));
    };
    let size = text
        .trim()
        .parse::<u64>()
        .map_err(|_| bad(format!("Content-Length {text:?} is not a size")))?;
    if size > crate::MAX_OBJECT_SIZE {
        return Err(bad(format!(
            "Content-Length {size} is past the largest object size drsd handles ({} bytes)",
            crate::MAX_OBJECT_SIZE
        )));
    }
    Ok(size)
}

fn meta(resp: &Response, op: &'static str, object: &str) -> Result<ObjectMeta, RemoteError> {
    let size = head_size(resp, op, object)?;
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
