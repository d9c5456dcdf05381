//! A Gen3 commons' upload endpoints, for a commons as a repo's object
//! remote: Fence (under `/user`) hands out signed PUT URLs for new records
//! (`POST /user/data/upload`, `GET /user/data/upload/{guid}`, and the
//! multipart `POST /user/data/multipart/{init,upload,complete}`), and the
//! commons' Indexd (under `/index`) holds the records, which begin blank
//! (no size, hashes or location) and are completed by `PUT
//! /index/blank/{guid}?rev=R` once the bytes are in.
//!
//! Every call to Fence and Indexd goes through the DRS client's request
//! path (`call.rs`): the Gen3 access token (from `DRSD_GEN3_CREDENTIALS`)
//! only to a server the user named in `DRSD_DRS_SERVERS`, retries, a
//! deadline, and the server's `{"error": ...}` quoted without secrets. The
//! signed URLs are [`SecretUrl`]s: a PUT to one carries no credential of
//! ours, and its errors name the record, never the URL.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;

use super::call::{self, Ask, Caller};
use super::model::{nullable, quoted};
use super::servers::below;
use super::{DrsClient, DrsError, IndexdRecord};
use crate::stores::transport::{send_retrying, Sent};
use crate::stores::{shown_url, Permanence, SecretUrl};

/// A Gen3 commons' Fence and Indexd, on the DRS client's connections and
/// credentials.
pub struct Fence<'a> {
    caller: &'a Caller,
    /// The commons' root (`https://host`): Fence under `/user`, Indexd
    /// under `/index`.
    root: url::Url,
}

/// One part of a multipart upload through Fence the store took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencePart {
    pub upload_id: String,
    /// The object's key in the commons' bucket (the upload's).
    pub key: String,
    pub number: u32,
    /// What the store answered for the part.
    pub etag: String,
}

/// An Indexd record of a commons, as the upload flow reads it: a blank one
/// has no size and no hashes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CommonsRecord {
    pub did: String,
    /// Every change makes a new one; a completion must name the current.
    #[serde(default)]
    pub rev: Option<String>,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default, deserialize_with = "nullable_map")]
    pub hashes: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub urls: Vec<String>,
}

impl CommonsRecord {
    /// An upload begun and not finished: nothing says what it holds.
    pub fn is_blank(&self) -> bool {
        self.size.is_none() && self.hashes.is_empty()
    }

    /// The hash `name` (`sha256`, `md5`), lowercased.
    pub fn hash(&self, name: &str) -> Option<String> {
        self.hashes.get(name).map(|h| h.to_ascii_lowercase())
    }
}

/// What a blank record is completed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub size: u64,
    pub sha256: String,
    pub md5: String,
    pub urls: Vec<String>,
    pub authz: Vec<String>,
}

impl Completion {
    /// The fields a completion (`PUT /index/blank/`) and a registration
    /// (`POST /index/`) both send.
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "size": self.size,
            "hashes": {"sha256": self.sha256, "md5": self.md5},
            "urls": self.urls,
            "authz": self.authz,
        })
    }
}

/// What became of a registration under a chosen did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    Made,
    /// The did was Indexd's already.
    Taken,
    /// The commons does not let this user choose the did (403 or 404:
    /// an Indexd behind a gateway that only Fence may write, or a policy
    /// that gives the user no `create` on the authz).
    Refused {
        status: u16,
    },
}

/// What a store answered of an object read back ([`Fence::probe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The object's whole size.
    pub size: u64,
    /// Its ETag, unquoted and lowercased, when the store gave one.
    pub etag: Option<String>,
}

/// The total of a `Content-Range: bytes 0-0/TOTAL`: the range asked, and
/// no other, or nothing.
fn range_total(value: &str) -> Option<u64> {
    let (unit, rest) = value.trim().split_once(' ')?;
    let (range, total) = rest.split_once('/')?;
    (unit.eq_ignore_ascii_case("bytes") && range.trim() == "0-0")
        .then(|| total.trim().parse().ok())
        .flatten()
}

/// A new upload: the record's guid and where its bytes go.
pub struct NewUpload {
    pub guid: String,
    pub url: SecretUrl,
}

/// A multipart upload begun through Fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipartStart {
    pub guid: String,
    pub upload_id: String,
}

#[derive(Deserialize)]
struct UploadAnswer {
    guid: String,
    url: String,
}

#[derive(Deserialize)]
struct UrlAnswer {
    url: String,
}

#[derive(Deserialize)]
struct InitAnswer {
    guid: String,
    #[serde(rename = "uploadId")]
    upload_id: String,
}

#[derive(Deserialize)]
struct PartAnswer {
    presigned_url: String,
}

impl DrsClient {
    /// The upload endpoints of the commons at `root`.
    pub fn fence(&self, root: &url::Url) -> Fence<'_> {
        Fence {
            caller: &self.caller,
            root: root.clone(),
        }
    }
}

impl Fence<'_> {
    /// `POST /user/data/upload`: a new blank record (Fence chooses its
    /// guid) and the signed URL its bytes go to.
    pub async fn begin_upload(
        &self,
        file_name: &str,
        authz: &[String],
    ) -> Result<NewUpload, DrsError> {
        let url = self.url(&["user", "data", "upload"])?;
        let asked = format!("Fence upload of {}", quoted(file_name));
        let body = serde_json::json!({"file_name": file_name, "authz": authz});
        let answer: UploadAnswer = self.post(&asked, &url, &body).await?;
        check_guid(&answer.guid).map_err(|why| self.bad(&asked, why.to_string()))?;
        let url = self.signed(&asked, answer.url)?;
        Ok(NewUpload {
            guid: answer.guid,
            url,
        })
    }

    /// `GET /user/data/upload/{guid}`: a fresh signed URL for the bytes of
    /// a record that exists (a blank one a push left).
    pub async fn upload_url(&self, guid: &str, file_name: &str) -> Result<SecretUrl, DrsError> {
        let mut url = self.url(&["user", "data", "upload", guid])?;
        url.query_pairs_mut().append_pair("file_name", file_name);
        let asked = format!("Fence upload URL of record {}", quoted(guid));
        let answer: UrlAnswer = self.get(&asked, &url).await?;
        self.signed(&asked, answer.url)
    }

    /// `POST /user/data/multipart/init`: a multipart upload into the
    /// existing record `guid`, or into a new blank one Fence makes.
    pub async fn multipart_init(
        &self,
        file_name: &str,
        guid: Option<&str>,
    ) -> Result<MultipartStart, DrsError> {
        let url = self.url(&["user", "data", "multipart", "init"])?;
        let asked = format!("Fence multipart upload of {}", quoted(file_name));
        let mut body = serde_json::json!({"file_name": file_name});
        if let Some(guid) = guid {
            body["guid"] = serde_json::Value::from(guid);
        }
        let answer: InitAnswer = self.post(&asked, &url, &body).await?;
        check_guid(&answer.guid).map_err(|why| self.bad(&asked, why.to_string()))?;
        if answer.upload_id.trim().is_empty() {
            return Err(self.bad(&asked, "the uploadId is empty".into()));
        }
        Ok(MultipartStart {
            guid: answer.guid,
            upload_id: answer.upload_id,
        })
    }

    /// `POST /user/data/multipart/upload`: the signed URL of part `number`.
    pub async fn part_url(
        &self,
        key: &str,
        upload_id: &str,
        number: u32,
    ) -> Result<SecretUrl, DrsError> {
        let url = self.url(&["user", "data", "multipart", "upload"])?;
        let asked = format!("Fence URL of part {number} of {}", quoted(key));
        let body = serde_json::json!({"key": key, "uploadId": upload_id, "partNumber": number});
        let answer: PartAnswer = self.post(&asked, &url, &body).await?;
        self.signed(&asked, answer.presigned_url)
    }

    /// `POST /user/data/multipart/complete` with each part's ETag.
    pub async fn multipart_complete(
        &self,
        key: &str,
        upload_id: &str,
        parts: &[(u32, String)],
    ) -> Result<(), DrsError> {
        let url = self.url(&["user", "data", "multipart", "complete"])?;
        let asked = format!(
            "Fence completion of the multipart upload of {}",
            quoted(key)
        );
        let parts: Vec<serde_json::Value> = parts
            .iter()
            .map(|(n, etag)| serde_json::json!({"PartNumber": n, "ETag": etag}))
            .collect();
        let body = serde_json::json!({"key": key, "uploadId": upload_id, "parts": parts});
        let body = body.to_string().into_bytes();
        let ask = Ask {
            asked: &asked,
            server: &self.root,
            accept: &[],
            build: &|http| call::post_json(http, &url, &body),
        };
        let deadline = complete_deadline(self.caller.api.deadline, parts.len());
        self.caller.send_within(&ask, deadline).await.map(drop)
    }

    /// The commons' Indexd record `did`, or `None` when it has none.
    pub async fn record(&self, did: &str) -> Result<Option<CommonsRecord>, DrsError> {
        let asked = format!("Indexd record {}", quoted(did));
        let url = self.index_url(did, At::Read)?;
        let ask = Ask {
            asked: &asked,
            server: &self.root,
            accept: &[StatusCode::NOT_FOUND],
            build: &|http| http.get(url.clone()),
        };
        let resp = self.caller.send(&ask).await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let record: CommonsRecord = call::read_json(resp, &ask).await?;
        // Indexd answers a bare uuid with its prefixed did, and the other
        // way round.
        let same = record.did == did
            || record.did.ends_with(&format!("/{did}"))
            || did.ends_with(&format!("/{}", record.did));
        if !same {
            let why = format!("it is the record {}", quoted(&record.did));
            return Err(call::bad_answer(&ask, why));
        }
        Ok(Some(record))
    }

    /// `POST /index/{did}`: a new version of `record` (same `baseid`)
    /// naming `sha256` beside its own hashes; the new version's did. For a
    /// record whose bytes were shown here to have that sha256.
    pub async fn add_sha256_version(
        &self,
        record: &IndexdRecord,
        sha256: crate::pool::Oid,
    ) -> Result<String, DrsError> {
        #[derive(Deserialize)]
        struct Registered {
            did: String,
        }
        let asked = format!(
            "Indexd new version of {} with sha256 {sha256}",
            quoted(&record.did)
        );
        let url = self.index_url(&record.did, At::Read)?;
        let body = super::indexd_client::version_body(record, sha256);
        let answer: Registered = self.post(&asked, &url, &body).await?;
        check_guid(&answer.did).map_err(|why| self.bad(&asked, why.to_string()))?;
        if answer.did == record.did {
            return Err(self.bad(
                &asked,
                "it answered the old version's did, not a new one".into(),
            ));
        }
        Ok(answer.did)
    }

    /// `PUT /index/blank/{did}?rev=R`: the blank record `did` completed
    /// with what the upload put there. A stale `rev` is refused (409).
    pub async fn complete(
        &self,
        did: &str,
        rev: &str,
        completion: &Completion,
    ) -> Result<(), DrsError> {
        let asked = format!("Indexd completion of record {}", quoted(did));
        let url = self.index_url(did, At::FillBlank(rev))?;
        let body = completion.json().to_string().into_bytes();
        let ask = Ask {
            asked: &asked,
            server: &self.root,
            accept: &[],
            build: &|http| {
                http.put(url.clone())
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.clone())
            },
        };
        self.caller.send(&ask).await.map(drop)
    }

    /// `POST /index/` of the record under the did `did` the client chose
    /// (the content's did, [`content_did`]), with the content's size and
    /// hashes and the locations `completion` names: none when it is
    /// registered before its bytes go up (Fence 10.2 and later sign an
    /// upload under a guid only for a record Indexd holds), and a record
    /// without a location is a claim of content, never of presence.
    /// [`Registration::Taken`] when the did is Indexd's already (409):
    /// someone registered it first, and the caller reads that record before
    /// counting on it.
    pub async fn register(
        &self,
        did: &str,
        file_name: &str,
        completion: &Completion,
    ) -> Result<Registration, DrsError> {
        check_guid(did).map_err(|why| self.bad("an Indexd registration", why.to_string()))?;
        let asked = format!("Indexd registration of record {}", quoted(did));
        let mut url = below(&self.root, &["index", "index"])
            .map_err(|why| self.bad("an Indexd registration", why.to_string()))?;
        url.set_path(&format!("{}/", url.path()));
        let mut body = completion.json();
        body["did"] = did.into();
        body["form"] = "object".into();
        body["file_name"] = file_name.into();
        let body = body.to_string().into_bytes();
        let ask = Ask {
            asked: &asked,
            server: &self.root,
            accept: &[
                StatusCode::CONFLICT,
                StatusCode::FORBIDDEN,
                StatusCode::NOT_FOUND,
            ],
            build: &|http| call::post_json(http, &url, &body),
        };
        let resp = self.caller.send(&ask).await?;
        Ok(match resp.status() {
            StatusCode::CONFLICT => Registration::Taken,
            status @ (StatusCode::FORBIDDEN | StatusCode::NOT_FOUND) => Registration::Refused {
                status: status.as_u16(),
            },
            _ => Registration::Made,
        })
    }

    /// `PUT /index/{did}?rev=R {urls}`: the record's locations set to
    /// `urls` (none takes them out). Indexd never changes a record's size
    /// or hashes here. `Ok(false)` when `rev` is stale (409): someone
    /// changed the record since it was read.
    pub async fn set_urls(&self, did: &str, rev: &str, urls: &[String]) -> Result<bool, DrsError> {
        let asked = format!("Indexd update of the locations of record {}", quoted(did));
        let url = self.index_url(did, At::Update(rev))?;
        let body = serde_json::json!({ "urls": urls }).to_string().into_bytes();
        let ask = Ask {
            asked: &asked,
            server: &self.root,
            accept: &[StatusCode::CONFLICT],
            build: &|http| {
                http.put(url.clone())
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.clone())
            },
        };
        let resp = self.caller.send(&ask).await?;
        Ok(resp.status() != StatusCode::CONFLICT)
    }

    /// `GET /user/data/download/{guid}` -> a URL Fence signs to read the
    /// record's first location.
    pub async fn download_url(&self, guid: &str) -> Result<SecretUrl, DrsError> {
        let mut segments = vec!["user", "data", "download"];
        segments.extend(guid.split('/'));
        let url = self.url(&segments)?;
        let asked = format!("Fence download URL of record {}", quoted(guid));
        let answer: UrlAnswer = self.get(&asked, &url).await?;
        self.signed(&asked, answer.url)
    }

    /// What the store says of the object at the signed URL `url`: its whole
    /// size and its ETag, from a GET of its first byte (`Range: bytes=0-0`;
    /// a store that ignores the range answers 200, and its body is not
    /// read). `what` names the object in errors; the URL is never shown.
    pub async fn probe(&self, what: &str, url: &SecretUrl) -> Result<Probe, DrsError> {
        let shown = format!("the signed URL of {what}");
        let asked = format!("read-back of {what}");
        let bad = |why: &str| DrsError::BadAnswer {
            asked: asked.clone(),
            server: shown.clone(),
            why: why.to_string(),
        };
        let make = |http: &reqwest::Client, url: &url::Url| {
            http.get(url.clone())
                .header(reqwest::header::RANGE, "bytes=0-0")
        };
        // Only the answer's head is read: it gets the metadata calls' time.
        let deadline = self.caller.api.deadline;
        let resp = tokio::time::timeout(deadline, self.send_signed(&asked, what, url, &make))
            .await
            .map_err(|_| DrsError::Deadline {
                asked: asked.clone(),
                server: shown.clone(),
                deadline,
            })??;
        let header = |name| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let size = match resp.status() {
            StatusCode::PARTIAL_CONTENT => header(reqwest::header::CONTENT_RANGE)
                .as_deref()
                .and_then(range_total)
                .ok_or_else(|| bad("a 206 whose Content-Range is not the first byte of a size"))?,
            _ => resp
                .content_length()
                .ok_or_else(|| bad("a 200 without a Content-Length"))?,
        };
        let etag = header(reqwest::header::ETAG).map(|e| {
            e.trim_start_matches("W/")
                .trim_matches('"')
                .to_ascii_lowercase()
        });
        Ok(Probe { size, etag })
    }

    /// A PUT of `body` to the signed URL `url`, with no credential of ours
    /// (the URL carries its own); the ETag the store answered, unquoted.
    /// Errors name `what` (the record, the part), never the URL.
    pub async fn put(
        &self,
        what: &str,
        url: &SecretUrl,
        body: bytes::Bytes,
    ) -> Result<Option<String>, DrsError> {
        let asked = format!("upload of {what}");
        let make =
            |http: &reqwest::Client, url: &url::Url| http.put(url.clone()).body(body.clone());
        let resp = self.send_signed(&asked, what, url, &make).await?;
        Ok(resp
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(|e| e.trim_matches('"').to_string()))
    }

    /// The answer to the request `make` builds for the signed URL `url`
    /// (retried as any call, sent with no credential of ours: the URL
    /// carries its own); a refusal or a failure is an error naming `what`,
    /// never the URL.
    async fn send_signed(
        &self,
        asked: &str,
        what: &str,
        url: &SecretUrl,
        make: &(dyn Fn(&reqwest::Client, &url::Url) -> reqwest::RequestBuilder + Sync),
    ) -> Result<reqwest::Response, DrsError> {
        let shown = format!("the signed URL of {what}");
        let parsed = url::Url::parse(url.expose()).map_err(|_| DrsError::BadAnswer {
            asked: asked.to_string(),
            server: shown.clone(),
            why: "the signed URL does not parse".into(),
        })?;
        let http = &self.caller.api.http;
        match send_retrying(self.caller.api.retry, &[], || make(http, &parsed)).await {
            Sent::Answered(resp) => Ok(resp),
            Sent::Refused { resp, attempt } => {
                let status = resp.status().as_u16();
                let said = call::error_message(resp, &[]).await;
                Err(DrsError::Http {
                    asked: asked.to_string(),
                    server: shown,
                    status,
                    attempts: attempt,
                    said,
                })
            }
            Sent::Failed { error, attempt } => Err(DrsError::Transport {
                asked: asked.to_string(),
                server: shown,
                why: call::chain(&error),
                attempts: attempt,
                permanence: Permanence::of_transport(&error),
            }),
        }
    }

    async fn post<T: serde::de::DeserializeOwned>(
        &self,
        asked: &str,
        url: &url::Url,
        body: &serde_json::Value,
    ) -> Result<T, DrsError> {
        let body = body.to_string().into_bytes();
        let ask = Ask {
            asked,
            server: &self.root,
            accept: &[],
            build: &|http| call::post_json(http, url, &body),
        };
        self.caller.json(&ask).await
    }

    async fn get<T: serde::de::DeserializeOwned>(
        &self,
        asked: &str,
        url: &url::Url,
    ) -> Result<T, DrsError> {
        let ask = Ask {
            asked,
            server: &self.root,
            accept: &[],
            build: &|http| http.get(url.clone()),
        };
        self.caller.json(&ask).await
    }

    /// A signed URL answered: http(s) and parseable, else refused without
    /// quoting it.
    fn signed(&self, asked: &str, text: String) -> Result<SecretUrl, DrsError> {
        match url::Url::parse(&text) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {
                Ok(SecretUrl::new(text))
            }
            _ => Err(self.bad(asked, "the signed URL is not an http(s) URL".into())),
        }
    }

    fn bad(&self, asked: &str, why: String) -> DrsError {
        DrsError::BadAnswer {
            asked: asked.to_string(),
            server: shown_url(&self.root),
            why,
        }
    }

    fn url(&self, segments: &[&str]) -> Result<url::Url, DrsError> {
        below(&self.root, segments).map_err(|why| self.bad("a Fence request", why.to_string()))
    }

    /// `/index/index/{did}` (or `/index/index/blank/{did}?rev=R`): the
    /// commons' Indexd is mounted at `/index`; a did's `/`s kept as
    /// separators, each part encoded.
    fn index_url(&self, did: &str, at: At<'_>) -> Result<url::Url, DrsError> {
        check_guid(did).map_err(|why| self.bad("an Indexd request", why.to_string()))?;
        let mut segments = vec!["index", "index"];
        if matches!(at, At::FillBlank(_)) {
            segments.push("blank");
        }
        segments.extend(did.split('/'));
        let mut url = below(&self.root, &segments).map_err(|why| {
            self.bad(
                "an Indexd request",
                format!("the did {}: {why}", quoted(did)),
            )
        })?;
        if let At::Update(rev) | At::FillBlank(rev) = at {
            url.query_pairs_mut().append_pair("rev", rev);
        }
        Ok(url)
    }
}

/// Which of Indexd's record routes a request goes to.
#[derive(Debug, Clone, Copy)]
enum At<'a> {
    /// `GET|POST /index/{did}`.
    Read,
    /// `PUT /index/{did}?rev=R`: urls, authz, file_name; never hashes.
    Update(&'a str),
    /// `PUT /index/blank/{did}?rev=R`: a blank record's size and hashes.
    FillBlank(&'a str),
}

/// A map that may be `null` (a blank record's hashes).
fn nullable_map<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    Ok(Option::<BTreeMap<String, String>>::deserialize(d)?.unwrap_or_default())
}

/// A guid a server answered that is not a printable name.
#[derive(Debug, thiserror::Error)]
#[error("the guid {} is not a printable name", quoted(.0))]
struct BadGuid(String);

/// A guid is a printable name of a sensible length.
fn check_guid(guid: &str) -> Result<(), BadGuid> {
    let ok = !guid.is_empty()
        && guid.len() <= 512
        && !guid.chars().any(|c| c.is_control() || c.is_whitespace());
    ok.then_some(()).ok_or_else(|| BadGuid(guid.to_string()))
}

/// The Indexd record did of content `sha256` in project `project` (`P-Q`),
/// as calypr/git-drs derives it: UUIDv5 in the DNS namespace over
/// `"<project>:<sha256>"`. Two machines (or drsd and git-drs) pushing the
/// same content into the same project name the same record.
pub fn content_did(project: &str, sha256: &str) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_DNS,
        format!("{project}:{sha256}").as_bytes(),
    )
    .to_string()
}

/// How long Fence may take to complete a multipart upload of `parts`
/// parts: the store assembles the object before Fence answers (S3 says a
/// completion may take minutes), so a metadata call's time (`setting`)
/// plus two seconds a part (a GiB in 64 MiB parts: the setting and 32 s).
fn complete_deadline(setting: Duration, parts: usize) -> Duration {
    let per_part = Duration::from_secs(2);
    setting + per_part.saturating_mul(u32::try_from(parts).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completing_an_upload_of_many_parts_is_given_longer_than_a_metadata_call() {
        let setting = Duration::from_secs(30);
        assert_eq!(complete_deadline(setting, 1), Duration::from_secs(32));
        assert_eq!(complete_deadline(setting, 16), Duration::from_secs(62));
        assert_eq!(
            complete_deadline(setting, 10_000),
            Duration::from_secs(20_030)
        );
    }

    #[test]
    fn the_did_of_content_is_uuid_v5_over_project_and_sha256() {
        let a = content_did("P-Q", &"ab".repeat(32));
        assert_eq!(a, content_did("P-Q", &"ab".repeat(32)), "deterministic");
        assert_ne!(a, content_did("P-R", &"ab".repeat(32)));
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 5);
        // The DNS namespace's v5 of a known name (RFC 4122's example, "www.example.com").
        assert_eq!(
            uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, b"www.example.com").to_string(),
            "2ed6657d-e927-568b-95e1-2665a8aea6a2"
        );
    }

    #[test]
    fn the_total_of_a_content_range_is_the_objects_size() {
        assert_eq!(range_total("bytes 0-0/1234"), Some(1234));
        assert_eq!(range_total("BYTES 0-0/7"), Some(7));
        assert_eq!(range_total("bytes 0-0/*"), None);
        assert_eq!(range_total("items 0-0/7"), None);
        assert_eq!(range_total("bytes0-0/7"), None);
        assert_eq!(range_total("bytes 5-5/7"), None, "not the byte asked");
    }

    #[test]
    fn a_record_with_no_size_and_no_hashes_is_blank() {
        let blank: CommonsRecord = serde_json::from_str(
            r#"{"did": "d", "rev": "r1", "size": null, "hashes": {}, "urls": []}"#,
        )
        .unwrap();
        assert!(blank.is_blank());
        let full: CommonsRecord = serde_json::from_str(
            r#"{"did": "d", "rev": "r2", "size": 3, "hashes": {"sha256": "AB"}, "urls": ["s3://b/k"]}"#,
        )
        .unwrap();
        assert!(!full.is_blank());
        assert_eq!(full.hash("sha256").as_deref(), Some("ab"));
    }
}
