//! S3 requests over presigned URLs: rusty-s3 signs, reqwest sends (through
//! `transport.rs`, which retries). Objects are read (HEAD, ranged and
//! conditional GET), written (PUT, conditional PUT), copied server-side and
//! deleted here; uploads and copies in parts are in `s3/multipart.rs`.
//! Errors name the object (`s3://bucket/key`) and, for a refusal, the
//! credential source, never a signed URL or a secret.

mod multipart;

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::{RequestBuilder, Response, StatusCode};
use rusty_s3::{Bucket, S3Action, UrlStyle};

use super::transport::{
    chain, etag, head_size, header, ranged_if, send_retrying, transport, with_headers, within,
    Retry, Sent,
};
use super::{RemoteError, S3Credentials, UploadJournal};
use crate::settings::{Key, Settings};

/// How long a presigned request stays valid: long enough for one slow part.
const SIGN_FOR: Duration = Duration::from_secs(3600);

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

/// Where the S3 API is and how to address it.
#[derive(Debug, Clone)]
pub struct S3Config {
    pub endpoint: url::Url,
    pub region: String,
    /// `http://host/bucket/key` (Ceph RGW, MinIO) rather than `bucket.host`.
    pub path_style: bool,
    pub retry: Retry,
    pub timeout: Duration,
    /// The most a HEAD may take in all, retries included (the
    /// `metadata_timeout` setting): `timeout` bounds one read only.
    pub metadata_timeout: Duration,
}

impl S3Config {
    /// [`S3Config::from_settings`] over the environment alone.
    pub fn from_env() -> Result<S3Config, RemoteError> {
        S3Config::from_settings(&Settings::from_env()?)
    }

    /// From `s3.endpoint` (`AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`;
    /// path-style when set, as RGW wants) and `s3.region` (`AWS_REGION` /
    /// `AWS_DEFAULT_REGION`).
    pub fn from_settings(settings: &Settings) -> Result<S3Config, RemoteError> {
        let custom = settings.text(Key::S3Endpoint);
        let text = custom.unwrap_or(DEFAULT_ENDPOINT).to_string();
        let endpoint = url::Url::parse(&text).map_err(|e| RemoteError::BadUrl {
            url: text.clone(),
            why: format!("S3 endpoint: {e}"),
        })?;
        Ok(S3Config {
            endpoint,
            region: settings.text(Key::S3Region).unwrap_or("us-east-1").into(),
            path_style: custom.is_some(),
            retry: Retry::default(),
            timeout: Duration::from_secs(60),
            metadata_timeout: settings
                .secs(Key::MetadataTimeout)
                .unwrap_or(super::http::DEFAULT_METADATA_TIMEOUT),
        })
    }
}

/// The endpoint used when none is configured.
const DEFAULT_ENDPOINT: &str = "https://s3.amazonaws.com";

/// For a host name that did not resolve while no endpoint is configured
/// (AWS's was tried, as for `s3://bucket` on a lab's own store): how to
/// set one.
fn endpoint_hint(endpoint: &url::Url, e: &reqwest::Error) -> Option<String> {
    let default = url::Url::parse(DEFAULT_ENDPOINT).ok()?;
    if endpoint.host_str() != default.host_str() || !super::error::is_name_failure(e) {
        return None;
    }
    Some(format!(
        "; no S3 endpoint is configured, so {DEFAULT_ENDPOINT} was tried: set \
         AWS_ENDPOINT_URL where drsd starts, or `endpoint` under [s3] in its settings \
         file (`drsctl config --path`), to your store's URL"
    ))
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

/// An S3 ETag: the MD5 of the object, or of its parts' MD5s with `-N`.
pub fn is_content_etag(etag: &str) -> bool {
    let (md5, parts) = match etag.split_once('-') {
        Some((md5, n)) => (md5, Some(n)),
        None => (etag, None),
    };
    let hex32 = md5.len() == 32 && md5.bytes().all(|b| b.is_ascii_hexdigit());
    hex32 && parts.is_none_or(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

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
            // A redirect (a regional endpoint) must not carry the signed
            // URL, query and all, to the next host.
            .referer(false)
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

    /// Where uploads and sent objects are recorded, when anywhere.
    pub(crate) fn journal(&self) -> Option<&dyn UploadJournal> {
        self.journal.as_deref()
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
            .send_head(&object, || self.http.head(url.clone()))
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
            .send_head(&object, || {
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

    /// Part `n`'s length and the upload's parts count, from a
    /// `HEAD ?partNumber=n`, when the store answers for a part: AWS S3
    /// does; Ceph RGW ignores `partNumber` and answers for the whole
    /// object without `x-amz-mp-parts-count`, which gives `None`.
    pub async fn head_part(
        &self,
        bucket: &str,
        key: &str,
        n: u32,
    ) -> Result<Option<(u64, u64)>, RemoteError> {
        let b = self.bucket(bucket)?;
        let mut action = b.head_object(self.creds.keys.as_ref(), key);
        let number = n.to_string();
        action.query_mut().insert("partNumber", number.as_str());
        let url = action.sign(SIGN_FOR);
        let object = format!("s3://{bucket}/{key}");
        let resp = self
            .send_head(&object, || self.http.head(url.clone()))
            .await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let Some(parts) = header(&resp, "x-amz-mp-parts-count").and_then(|p| p.parse().ok()) else {
            return Ok(None);
        };
        Ok(Some((head_size(&resp, "HEAD", &object)?, parts)))
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
            Sent::Failed { error, attempt } => {
                let mut e = transport(op, object, attempt, &error);
                if let (RemoteError::Transport { why, .. }, Some(hint)) =
                    (&mut e, endpoint_hint(&self.config.endpoint, &error))
                {
                    why.push_str(&hint);
                }
                Err(e)
            }
        }
    }

    /// A HEAD of `object`, with a whole-answer deadline (a HEAD has no
    /// body: the headers are the answer), so a store trickling them cannot
    /// hold add-url or a push.
    async fn send_head(
        &self,
        object: &str,
        make: impl Fn() -> RequestBuilder,
    ) -> Result<Response, RemoteError> {
        let sent = self.send("HEAD", object, &[StatusCode::NOT_FOUND], make);
        within(self.config.metadata_timeout, "HEAD", object, sent).await
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

fn error_code(xml: &str) -> String {
    xml.split("<Code>")
        .nth(1)
        .and_then(|s| s.split("</Code>").next())
        .unwrap_or("unknown error")
        .to_string()
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

#[cfg(test)]
mod endpoint_tests {
    use super::{endpoint_hint, DEFAULT_ENDPOINT};

    /// A request to a name that never resolves (RFC 6761's `.invalid`).
    async fn unresolvable() -> reqwest::Error {
        reqwest::Client::new()
            .head("http://no-such-bucket.drsd-test.invalid/key")
            .send()
            .await
            .expect_err("an .invalid host does not resolve")
    }

    #[tokio::test]
    async fn a_name_that_does_not_resolve_names_its_host_and_how_to_set_the_endpoint() {
        let e = unresolvable().await;
        let error = crate::stores::transport::transport("HEAD", "s3://b/k", 1, &e).to_string();
        assert!(
            error.contains("looking up the host no-such-bucket.drsd-test.invalid"),
            "{error}"
        );
        let default = url::Url::parse(DEFAULT_ENDPOINT).unwrap();
        let hint = endpoint_hint(&default, &e).expect("a hint for the default endpoint");
        assert!(hint.contains("AWS_ENDPOINT_URL"), "{hint}");
        assert!(hint.contains("drsctl config --path"), "{hint}");
        let configured = url::Url::parse("http://rgw.lab:8080").unwrap();
        assert_eq!(
            endpoint_hint(&configured, &e),
            None,
            "the endpoint was chosen"
        );
    }
}
