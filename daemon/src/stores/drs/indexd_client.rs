//! A Gen3 Indexd client: look records up by sha256 or did, and register
//! new ones, so a pushed object can be named by a DRS URI.
//!
//! Paths (under the Indexd root the user configured): `GET
//! /index?hash=sha256:HEX` (and `md5:HEX&size=N`), `POST /index/{did}` (a
//! new version of a record), `GET /index/{did}` (a did's `/`s kept as path
//! separators, each part percent-encoded), `POST /index/` with HTTP Basic
//! from the user's netrc for the Indexd host (its `default` entry too: the
//! user chose this host). Every answer is checked: a lookup by hash keeps
//! only records whose sha256 is the one asked, a record fetched by did
//! must carry that did, and a new did must be a printable name.

use std::collections::BTreeMap;

use reqwest::StatusCode;
use serde::{Deserialize, Serialize};

use super::auth::DrsAuth;
use super::call::{self, Api, Ask, Caller, Pending};
use super::model::{nullable, quoted};
use super::netrc::NetrcFile;
use super::servers::{below, Unaddressable};
use super::DrsError;
use crate::pool::Oid;
use crate::stores::{shown_url, HttpConfig};

/// Records asked for per page of a lookup by size: Indexd's largest.
const SIZE_PAGE: usize = 1024;
/// Pages of a lookup by size read at most before its answer is taken to be
/// yes ([`IndexdClient::any_md5_only_of_size`]).
const SIZE_PAGES: usize = 8;

/// An Indexd record (the fields drsd reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexdRecord {
    pub did: String,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub hashes: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub urls: Vec<String>,
    #[serde(default)]
    pub file_name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub authz: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub acl: Vec<String>,
}

/// A record to register: the server chooses its did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRecord {
    pub size: u64,
    pub sha256: Oid,
    /// 32 lowercase hex digits.
    pub md5: String,
    /// An S3 ETag (`<md5>` or `<md5>-<parts>`), when there is one.
    pub etag: Option<String>,
    pub urls: Vec<String>,
    pub file_name: String,
    pub authz: Vec<String>,
}

#[derive(Deserialize)]
struct Records {
    #[serde(default, deserialize_with = "nullable")]
    records: Vec<IndexdRecord>,
}

#[derive(Deserialize)]
struct Registered {
    did: String,
}

/// Talks to one Indexd.
pub struct IndexdClient {
    caller: Caller,
    base: url::Url,
}

impl IndexdClient {
    /// The Indexd at `base` (its root, e.g. `https://commons.example.org`).
    /// Logins from `netrc`.
    pub fn new(
        http: &HttpConfig,
        base: url::Url,
        netrc: NetrcFile,
    ) -> Result<IndexdClient, DrsError> {
        Ok(IndexdClient::with_netrc(Api::new(http)?, base, netrc))
    }

    /// On connections shared with others (the facade's).
    pub(crate) fn with_netrc(api: Api, base: url::Url, netrc: NetrcFile) -> IndexdClient {
        let auth = DrsAuth::none().netrc_file(netrc).trusting_url(&base);
        IndexdClient {
            caller: Caller {
                api,
                auth,
                pending: Pending::default(),
            },
            base,
        }
    }

    /// The records holding content `oid`.
    pub async fn by_sha256(&self, oid: Oid) -> Result<Vec<IndexdRecord>, DrsError> {
        let mut url = self.url(&["index"])?;
        url.query_pairs_mut()
            .append_pair("hash", &format!("sha256:{}", oid.to_hex()));
        let asked = format!("Indexd lookup of sha256 {oid}");
        let found: Records = self.get_json(&asked, &url).await?;
        let (kept, other): (Vec<_>, Vec<_>) = found.records.into_iter().partition(|r| {
            r.hashes
                .get("sha256")
                .is_some_and(|h| h.eq_ignore_ascii_case(&oid.to_hex()))
        });
        if !other.is_empty() {
            log::warn!(
                "{asked}: {} answered {} record(s) of other content; ignored",
                shown_url(&self.base),
                other.len()
            );
        }
        Ok(kept)
    }

    /// Whether the server has a record of `size` bytes naming an md5 and no
    /// sha256, which may be the object under its md5 only: when none is,
    /// its md5 need not be computed before the upload (which hashes it as
    /// it sends). Records of the size naming a sha256 are not: of this
    /// content [`Self::by_sha256`] found them, of other content they are
    /// not the object (a commons holds many of a common size, and every
    /// record this daemon completes names its sha256). Paged as Indexd
    /// pages (`start`: the did after which, in did order); past
    /// [`SIZE_PAGES`] pages the answer is yes, and the md5 is computed.
    pub async fn any_md5_only_of_size(&self, size: u64) -> Result<bool, DrsError> {
        let mut start: Option<String> = None;
        for _ in 0..SIZE_PAGES {
            let mut url = self.url(&["index"])?;
            url.query_pairs_mut()
                .append_pair("size", &size.to_string())
                .append_pair("limit", &SIZE_PAGE.to_string());
            if let Some(after) = &start {
                url.query_pairs_mut().append_pair("start", after);
            }
            let asked = format!("Indexd lookup of records of {size} bytes");
            let found: Records = self.get_json(&asked, &url).await?;
            if found.records.iter().any(|r| {
                r.size == Some(size)
                    && r.hashes.contains_key("md5")
                    && !r.hashes.contains_key("sha256")
            }) {
                return Ok(true);
            }
            if found.records.len() < SIZE_PAGE {
                return Ok(false);
            }
            let last = found.records.last().map(|r| r.did.clone());
            // A page not moving past its start (a server ignoring `start`)
            // leaves the rest unseen: they may hold one.
            if last == start {
                return Ok(true);
            }
            start = last;
        }
        Ok(true)
    }

    /// The records of `size` bytes with md5 `md5` (32 lowercase hex) that
    /// name no sha256: most Gen3 records carry md5 and size only. A record
    /// with a sha256 is left out: of this content it was found by
    /// [`Self::by_sha256`], of other content it is not this object.
    pub async fn by_md5_only(&self, md5: &str, size: u64) -> Result<Vec<IndexdRecord>, DrsError> {
        let mut url = self.url(&["index"])?;
        url.query_pairs_mut()
            .append_pair("hash", &format!("md5:{md5}"))
            .append_pair("size", &size.to_string());
        let asked = format!("Indexd lookup of md5 {md5}");
        let found: Records = self.get_json(&asked, &url).await?;
        Ok(found
            .records
            .into_iter()
            .filter(|r| {
                r.size == Some(size)
                    && r.hashes
                        .get("md5")
                        .is_some_and(|h| h.eq_ignore_ascii_case(md5))
                    && !r.hashes.contains_key("sha256")
            })
            .collect())
    }

    /// Adds a version of `record` (`POST /index/{did}`: a new did, the same
    /// `baseid`) carrying `sha256` beside its own hashes, urls, name and
    /// access; returns the new version's did. For a record whose bytes
    /// were shown here to have that sha256: a client asking by sha256 then
    /// finds it, and the commons keeps one object at one location.
    pub async fn add_sha256_version(
        &self,
        record: &IndexdRecord,
        sha256: Oid,
    ) -> Result<String, DrsError> {
        let asked = format!(
            "Indexd new version of {} with sha256 {sha256}",
            quoted(&record.did)
        );
        let url = self.did_url(&record.did, &asked)?;
        let body = version_body(record, sha256).to_string().into_bytes();
        let ask = Ask {
            asked: &asked,
            server: &self.base,
            accept: &[],
            build: &|http| call::post_json(http, &url, &body),
        };
        let registered: Registered = self.caller.json(&ask).await?;
        check_did(&registered.did).map_err(|why| call::bad_answer(&ask, why))?;
        if registered.did == record.did {
            let why = "it answered the old version's did, not a new one".to_string();
            return Err(call::bad_answer(&ask, why));
        }
        Ok(registered.did)
    }

    /// The record `did`, or `None` when Indexd has none.
    pub async fn get(&self, did: &str) -> Result<Option<IndexdRecord>, DrsError> {
        let asked = format!("Indexd record {}", quoted(did));
        let url = self.did_url(did, &asked)?;
        let ask = Ask {
            asked: &asked,
            server: &self.base,
            accept: &[StatusCode::NOT_FOUND],
            build: &|http| http.get(url.clone()),
        };
        let resp = self.caller.send(&ask).await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let record: IndexdRecord = call::read_json(resp, &ask).await?;
        if record.did != did {
            let why = format!("it is the record {}", quoted(&record.did));
            return Err(call::bad_answer(&ask, why));
        }
        Ok(Some(record))
    }

    /// Registers `record` and returns the did Indexd gave it.
    pub async fn register(&self, record: &NewRecord) -> Result<String, DrsError> {
        check_new(record)?;
        let mut url = self.url(&["index"])?;
        url.set_path(&format!("{}/", url.path()));
        let asked = format!("Indexd registration of sha256 {}", record.sha256);
        let body = body_of(record).to_string().into_bytes();
        let ask = Ask {
            asked: &asked,
            server: &self.base,
            accept: &[],
            build: &|http| call::post_json(http, &url, &body),
        };
        let registered: Registered = self.caller.json(&ask).await?;
        check_did(&registered.did).map_err(|why| call::bad_answer(&ask, why))?;
        Ok(registered.did)
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        asked: &str,
        url: &url::Url,
    ) -> Result<T, DrsError> {
        let ask = Ask {
            asked,
            server: &self.base,
            accept: &[],
            build: &|http| http.get(url.clone()),
        };
        self.caller.json(&ask).await
    }

    fn url(&self, segments: &[&str]) -> Result<url::Url, DrsError> {
        below(&self.base, segments).map_err(|why| DrsError::BadAnswer {
            asked: "an Indexd request".into(),
            server: shown_url(&self.base),
            why: why.to_string(),
        })
    }

    /// `/index/{did}`, the did's `/`s kept as separators and each part
    /// encoded; a did with an empty, `.` or `..` part is refused.
    fn did_url(&self, did: &str, asked: &str) -> Result<url::Url, DrsError> {
        let refuse = |why: BadDid| DrsError::BadAnswer {
            asked: asked.to_string(),
            server: shown_url(&self.base),
            why: format!("the did cannot be asked for: {why}"),
        };
        check_did(did).map_err(refuse)?;
        let mut segments = vec!["index"];
        segments.extend(did.split('/'));
        below(&self.base, &segments).map_err(|why| refuse(BadDid::Unaddressable(why)))
    }
}

/// The JSON body of a registration: an object record with its hashes.
fn body_of(record: &NewRecord) -> serde_json::Value {
    let mut hashes = serde_json::json!({
        "sha256": record.sha256.to_hex(),
        "md5": record.md5,
    });
    if let Some(etag) = &record.etag {
        hashes["etag"] = serde_json::Value::from(etag.as_str());
    }
    serde_json::json!({
        "form": "object",
        "size": record.size,
        "hashes": hashes,
        "urls": record.urls,
        "file_name": record.file_name,
        "authz": record.authz,
    })
}

/// The JSON body of a new version of `record` (Indexd's `POST /index/{did}`
/// takes the same schema as a registration): its hashes with `sha256`
/// added, the rest kept as they are.
pub(super) fn version_body(record: &IndexdRecord, sha256: Oid) -> serde_json::Value {
    let mut hashes: BTreeMap<String, String> = record
        .hashes
        .iter()
        .map(|(k, v)| (k.clone(), v.to_ascii_lowercase()))
        .collect();
    hashes.insert("sha256".into(), sha256.to_hex());
    let mut body = serde_json::json!({
        "form": "object",
        "size": record.size,
        "hashes": hashes,
        "urls": record.urls,
        "authz": record.authz,
        "acl": record.acl,
    });
    if let Some(name) = &record.file_name {
        body["file_name"] = serde_json::Value::from(name.as_str());
    }
    body
}

/// What Indexd would refuse with a 400, refused here by name.
fn check_new(record: &NewRecord) -> Result<(), DrsError> {
    let bad = |why: String| DrsError::BadChecksum {
        object: format!("Indexd record of {}", quoted(&record.file_name)),
        why,
    };
    let hex = |s: &str| s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !hex(&record.md5) {
        return Err(bad(format!(
            "its md5 {} is not 32 lowercase hex digits",
            quoted(&record.md5)
        )));
    }
    if let Some(etag) = &record.etag {
        let (md5, parts) = match etag.split_once('-') {
            Some((md5, parts)) => (md5, Some(parts)),
            None => (etag.as_str(), None),
        };
        let parts_ok = parts.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if !hex(md5) || !parts_ok {
            return Err(bad(format!(
                "its ETag {} is not <md5> or <md5>-<parts>",
                quoted(etag)
            )));
        }
    }
    Ok(())
}

/// Why a did cannot be asked for, or taken from an answer.
#[derive(Debug, thiserror::Error)]
enum BadDid {
    /// Holds the did quoted as answers are (`model::quoted`).
    #[error("the did {0} is not a printable name")]
    Unprintable(String),
    #[error(transparent)]
    Unaddressable(Unaddressable),
}

/// A did is a printable name of a sensible length.
fn check_did(did: &str) -> Result<(), BadDid> {
    let ok = !did.is_empty()
        && did.len() <= 512
        && !did.chars().any(|c| c.is_control() || c.is_whitespace());
    ok.then_some(())
        .ok_or_else(|| BadDid::Unprintable(quoted(did)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> NewRecord {
        NewRecord {
            size: 3,
            sha256: Oid::of(b"abc"),
            md5: "900150983cd24fb0d6963f7d28e17f72".into(),
            etag: Some("900150983cd24fb0d6963f7d28e17f72-2".into()),
            urls: vec!["s3://b/k".into()],
            file_name: "k.bam".into(),
            authz: vec!["/programs/p".into()],
        }
    }

    #[test]
    fn a_registration_body_is_an_object_record_with_its_hashes() {
        let body = body_of(&record());
        assert_eq!(body["form"], "object");
        assert_eq!(body["size"], 3);
        assert_eq!(body["hashes"]["sha256"], Oid::of(b"abc").to_hex());
        assert_eq!(body["hashes"]["etag"], "900150983cd24fb0d6963f7d28e17f72-2");
        assert_eq!(body["urls"][0], "s3://b/k");
        assert_eq!(body["authz"][0], "/programs/p");
        let without = body_of(&NewRecord {
            etag: None,
            ..record()
        });
        assert!(without["hashes"].get("etag").is_none());
    }

    #[test]
    fn a_new_version_keeps_the_records_hashes_urls_and_access_and_adds_the_sha256() {
        let mut hashes = BTreeMap::new();
        hashes.insert(
            "md5".to_string(),
            "900150983CD24FB0D6963F7D28E17F72".to_string(),
        );
        hashes.insert("crc".to_string(), "352441c2".to_string());
        let record = IndexdRecord {
            did: "dg.TEST/1".into(),
            size: Some(3),
            hashes,
            urls: vec!["s3://b/k".into()],
            file_name: Some("k.bam".into()),
            authz: vec!["/programs/p".into()],
            acl: vec!["p".into()],
        };
        let body = version_body(&record, Oid::of(b"abc"));
        assert_eq!(body["form"], "object");
        assert_eq!(body["size"], 3);
        assert_eq!(body["hashes"]["sha256"], Oid::of(b"abc").to_hex());
        assert_eq!(body["hashes"]["md5"], "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(body["hashes"]["crc"], "352441c2");
        assert_eq!(body["urls"][0], "s3://b/k");
        assert_eq!(body["authz"][0], "/programs/p");
        assert_eq!(body["acl"][0], "p");
        assert_eq!(body["file_name"], "k.bam");
        assert!(
            body.get("did").is_none(),
            "Indexd chooses the new version's did"
        );
    }

    #[test]
    fn hashes_indexd_would_refuse_are_refused_first() {
        assert!(check_new(&record()).is_ok());
        assert!(check_new(&NewRecord {
            etag: Some("900150983cd24fb0d6963f7d28e17f72".into()),
            ..record()
        })
        .is_ok());
        for (md5, etag) in [
            ("900150983CD24FB0D6963F7D28E17F72", None),
            ("abc", None),
            ("900150983cd24fb0d6963f7d28e17f72", Some("xyz")),
            (
                "900150983cd24fb0d6963f7d28e17f72",
                Some("900150983cd24fb0d6963f7d28e17f72-"),
            ),
            (
                "900150983cd24fb0d6963f7d28e17f72",
                Some("900150983cd24fb0d6963f7d28e17f72-2a"),
            ),
        ] {
            let bad = NewRecord {
                md5: md5.into(),
                etag: etag.map(str::to_string),
                ..record()
            };
            assert!(check_new(&bad).is_err(), "{md5} {etag:?}");
        }
    }

    #[test]
    fn a_did_keeps_its_slashes_as_separators_and_hostile_parts_are_refused() {
        let api = Api::new(&HttpConfig::default()).unwrap();
        let client = IndexdClient::with_netrc(
            api,
            url::Url::parse("http://127.0.0.1:1/root").unwrap(),
            NetrcFile::locate(|_| None),
        );
        let url = client.did_url("dg.TEST/0a1b?x#y", "t").unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:1/root/index/dg.TEST/0a1b%3Fx%23y"
        );
        for did in ["../admin", "a//b", "a/./b", "", "a b", "a\nb", "/x"] {
            assert!(client.did_url(did, "t").is_err(), "{did:?}");
        }
    }
}
