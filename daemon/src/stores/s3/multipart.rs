//! Multipart requests: uploads of a file in parts of a fixed size (so the
//! same file always gets the same ETag), server-side copies in parts
//! (UploadPartCopy) past what one CopyObject may copy, and listing and
//! aborting uploads. Each upload is recorded in the client's journal from
//! before its first part until it is completed or aborted, so a killed
//! daemon's uploads are aborted at the next start.

use std::path::Path;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use reqwest::StatusCode;
use rusty_s3::{Bucket, S3Action};

use super::super::transport::{etag, transport, with_headers};
use super::{pin_headers, refused_in_body, CopySource, ObjectMeta, S3Client, SIGN_FOR};
use crate::stores::{MultipartUpload, RemoteError};

/// Parts copied at once by [`S3Client::copy_in_parts`]: each is a server-side
/// copy, so a few keep the store busy without piling up requests.
const COPY_PARTS_AT_ONCE: usize = 4;

/// Parts sent at once by a multipart upload from a file: the next parts
/// are read and on the wire while one is still going, at the memory of
/// this many parts (64 MiB each by default).
const PARTS_AT_ONCE: usize = 3;

/// The most parts S3 takes in one multipart upload.
const MAX_PARTS: u16 = 10_000;

/// Where the parts of a multipart upload come from.
enum Parts<'a> {
    File(&'a Path),
    Copy(&'a CopySource<'a>),
}

impl S3Client {
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

    /// Sends the file's parts, [`PARTS_AT_ONCE`] in flight, each read from
    /// its own offset when its turn comes; their ETags in part order.
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
        let file = std::sync::Arc::new(std::fs::File::open(path).map_err(io_err)?);
        let size = file.metadata().map_err(io_err)?.len();
        let part_size = part_size.max(1);
        // An empty file is one empty part: S3 wants at least one.
        let count = size.div_ceil(part_size).max(1);
        if count > u64::from(MAX_PARTS) {
            return Err(RemoteError::Protocol {
                op: "upload",
                object: object.to_string(),
                why: format!(
                    "{size} bytes in parts of {part_size} make {count} parts; S3 takes {MAX_PARTS} at most"
                ),
            });
        }
        let parts = (1..=count).map(|n| {
            let offset = (n - 1) * part_size;
            (n, offset, part_size.min(size.saturating_sub(offset)))
        });
        stream::iter(parts)
            .map(|(number, offset, len)| {
                let file = file.clone();
                async move {
                    let read = crate::blocking(move || read_part(&file, offset, len)).await;
                    let part = Bytes::from(read.map_err(io_err)?);
                    self.upload_part(b, object, key, upload_id, number, part)
                        .await
                }
            })
            .buffered(PARTS_AT_ONCE)
            .try_collect()
            .await
    }

    /// Sends part `number` of the upload; its ETag.
    async fn upload_part(
        &self,
        b: &Bucket,
        object: &str,
        key: &str,
        upload_id: &str,
        number: u64,
        part: Bytes,
    ) -> Result<String, RemoteError> {
        let no_etag = || RemoteError::Protocol {
            op: "upload part",
            object: object.to_string(),
            why: format!("part {number} came back without an ETag"),
        };
        let number = u16::try_from(number)
            .ok()
            .filter(|n| *n <= MAX_PARTS)
            .ok_or_else(|| RemoteError::Protocol {
                op: "upload part",
                object: object.to_string(),
                why: format!("part {number} is past the {MAX_PARTS} parts S3 allows"),
            })?;
        let url = b
            .upload_part(self.creds.keys.as_ref(), key, number, upload_id)
            .sign(SIGN_FOR);
        let resp = self
            .send("upload part", object, &[], || {
                self.http.put(url.clone()).body(part.clone())
            })
            .await?;
        etag(&resp).ok_or_else(no_etag)
    }
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

/// `len` bytes of `file` from `offset` (fewer only at its end).
fn read_part(file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut part = vec![0; len as usize];
    file.read_exact_at(&mut part, offset)?;
    Ok(part)
}
