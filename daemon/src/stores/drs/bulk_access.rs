//! Signed URLs of many objects at once: `POST /objects/access` (DRS 1.4,
//! GetBulkAccessURL), `{"bulk_object_access_ids": [{"bulk_object_id",
//! "bulk_access_ids"}]}`, answered with `resolved_drs_object_access_urls`
//! lines `{drs_object_id, drs_access_id, url, headers}`.
//!
//! It only saves round trips: whatever it does not give (a server without
//! it, an object it leaves unresolved, a call that fails, a line that does
//! not fit) is asked by `GET /objects/{id}/access/{access_id}` at its read,
//! as if there had been no bulk request. So it never fails: a failure is
//! logged, and the caller simply gets fewer URLs.
//!
//! A server that answers 404, 405 or 501, or with something that is not
//! the JSON the spec gives, has no bulk access (Gen3's Indexd and Fence
//! among them): that is kept for the client's life, and the server is not
//! asked so again.
//!
//! Each line is checked against what was asked: its object id and access
//! id must be a pair the request named (a URL for anything else is
//! refused), and its URL and headers pass the checks of a single access
//! URL (`client::checked_access`). The URLs are secrets: nothing here logs
//! or keeps one; the caller holds them for its batch only.

use std::collections::{BTreeMap, HashMap, HashSet};

use reqwest::StatusCode;
use serde::Deserialize;

use super::bulk::Bulk;
use super::call::{self, Ask};
use super::client::checked_access;
use super::model::{nullable, quoted, AccessUrl, AccessUrlJson};
use super::servers::below;
use super::{DrsClient, DrsError, DrsUri};
use crate::stores::{shown_url, SecretUrl};

/// The most pairs in one request, whatever the server declares: its answer
/// is read into memory whole, and a batch's URLs must all be used within
/// the short time they are held.
pub const ACCESS_BATCH: usize = 100;

/// One access URL wanted: of the object `object_id` (as its record names
/// it) on `uri`'s server, by its access id `access_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessWanted {
    pub uri: DrsUri,
    pub object_id: String,
    pub access_id: String,
}

/// The URLs a bulk request gave, by `(object id, access id)`.
pub type BulkUrls = HashMap<(String, String), AccessUrl>;

/// How one request went.
enum Posted {
    Answered(BulkUrls),
    /// The server has no bulk access.
    Unsupported,
}

/// The answer's lines, each read on its own: one line that cannot be read
/// must not spoil the others.
#[derive(Deserialize)]
struct BulkAccessAnswer {
    #[serde(default, deserialize_with = "nullable")]
    resolved_drs_object_access_urls: Vec<serde_json::Value>,
    /// Only its presence is read: an answer with neither key is not this
    /// endpoint's.
    #[serde(default)]
    summary: Option<serde_json::Value>,
}

/// One line of `resolved_drs_object_access_urls`.
#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    drs_object_id: Option<String>,
    #[serde(default)]
    drs_access_id: Option<String>,
    url: SecretUrl,
    #[serde(default, deserialize_with = "nullable")]
    headers: Vec<String>,
}

impl DrsClient {
    /// Access URLs of `wanted`, by `(object id, access id)`, in one
    /// request per server and per [`ACCESS_BATCH`] (see the module notes).
    /// What is missing from the answer is to be asked one by one.
    pub async fn bulk_access(&self, wanted: &[AccessWanted]) -> BulkUrls {
        let mut by_server: BTreeMap<String, (url::Url, Vec<&AccessWanted>)> = BTreeMap::new();
        for w in wanted {
            match self.servers().base_url(&w.uri) {
                Ok(base) => by_server
                    .entry(base.to_string())
                    .or_insert_with(|| (base, Vec::new()))
                    .1
                    .push(w),
                Err(e) => log::debug!("bulk access: {e}"),
            }
        }
        let mut out = BulkUrls::new();
        for (base, asked) in by_server.into_values() {
            out.extend(self.bulk_access_of(&base, &asked).await);
        }
        out
    }

    /// Whether the server at `base` was found to have no bulk access.
    pub fn lacks_bulk_access(&self, base: &url::Url) -> bool {
        crate::lock::lock(&self.no_bulk_access).contains(base.as_str())
    }

    /// [`DrsClient::bulk_access`] for the server at `base`.
    async fn bulk_access_of(&self, base: &url::Url, asked: &[&AccessWanted]) -> BulkUrls {
        let mut out = BulkUrls::new();
        if asked.is_empty() || self.lacks_bulk_access(base) {
            return out;
        }
        let size = match self.bulk_mode(base).await {
            Bulk::Batches { size, .. } => size.clamp(1, ACCESS_BATCH),
            Bulk::Unsupported => ACCESS_BATCH,
        };
        for chunk in asked.chunks(size) {
            match self.post_access(base, chunk).await {
                Ok(Posted::Answered(urls)) => out.extend(urls),
                Ok(Posted::Unsupported) => {
                    log::info!(
                        "{}: no bulk access URLs (POST /objects/access); each object's URL is asked on its own",
                        shown_url(base)
                    );
                    crate::lock::lock(&self.no_bulk_access).insert(base.to_string());
                    break;
                }
                // The URLs are asked one by one at each read, which will
                // say what is wrong if it still is.
                Err(e) => log::info!("{e}; each object's URL is asked on its own"),
            }
        }
        out
    }

    async fn post_access(
        &self,
        base: &url::Url,
        chunk: &[&AccessWanted],
    ) -> Result<Posted, DrsError> {
        let asked = format!("bulk access URLs of {} DRS objects", chunk.len());
        let url = below(base, &["objects", "access"]).map_err(|why| DrsError::BadAnswer {
            asked: asked.clone(),
            server: shown_url(base),
            why: why.to_string(),
        })?;
        let body = request_body(chunk).to_string().into_bytes();
        let ask = Ask {
            asked: &asked,
            server: base,
            accept: &[
                StatusCode::NOT_FOUND,
                StatusCode::METHOD_NOT_ALLOWED,
                StatusCode::NOT_IMPLEMENTED,
            ],
            build: &|http| call::post_json(http, &url, &body),
        };
        let resp = self.caller.send(&ask).await?;
        if matches!(
            resp.status(),
            StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_IMPLEMENTED
        ) {
            return Ok(Posted::Unsupported);
        }
        let answer: BulkAccessAnswer = match call::read_json(resp, &ask).await {
            Ok(answer) => answer,
            Err(DrsError::BadAnswer { .. }) => return Ok(Posted::Unsupported),
            Err(e) => return Err(e),
        };
        if answer.summary.is_none() && answer.resolved_drs_object_access_urls.is_empty() {
            return Ok(Posted::Unsupported);
        }
        Ok(Posted::Answered(matched(chunk, &answer, &ask)))
    }
}

/// `{"bulk_object_access_ids": [{"bulk_object_id", "bulk_access_ids"}]}`,
/// one entry per object, its access ids in the order asked.
fn request_body(chunk: &[&AccessWanted]) -> serde_json::Value {
    let mut per_object: Vec<(&str, Vec<&str>)> = Vec::new();
    for w in chunk {
        match per_object.iter_mut().find(|(id, _)| *id == w.object_id) {
            Some((_, ids)) if !ids.contains(&w.access_id.as_str()) => ids.push(&w.access_id),
            Some(_) => {}
            None => per_object.push((&w.object_id, vec![&w.access_id])),
        }
    }
    let ids: Vec<serde_json::Value> = per_object
        .into_iter()
        .map(|(id, access)| serde_json::json!({"bulk_object_id": id, "bulk_access_ids": access}))
        .collect();
    serde_json::json!({ "bulk_object_access_ids": ids })
}

/// The answer's URLs for pairs `chunk` asked, each checked as a single
/// access URL is; every other line is refused (and logged, by ids only).
fn matched(chunk: &[&AccessWanted], answer: &BulkAccessAnswer, ask: &Ask<'_>) -> BulkUrls {
    let asked: HashSet<(&str, &str)> = chunk
        .iter()
        .map(|w| (w.object_id.as_str(), w.access_id.as_str()))
        .collect();
    let server = shown_url(ask.server);
    let mut out = BulkUrls::new();
    for value in &answer.resolved_drs_object_access_urls {
        let line: Line = match serde_json::from_value(value.clone()) {
            Ok(line) => line,
            Err(e) => {
                log::warn!(
                    "{}: {server} sent a line that is {}; ignored",
                    ask.asked,
                    call::json_error(&e)
                );
                continue;
            }
        };
        let (Some(object), Some(access)) = (line.drs_object_id, line.drs_access_id) else {
            log::warn!(
                "{}: {server} sent a URL naming no object id or access id; refused",
                ask.asked
            );
            continue;
        };
        let key = (object, access);
        if !asked.contains(&(key.0.as_str(), key.1.as_str())) {
            log::warn!(
                "{}: {server} sent a URL for object {} by access id {}, which was not asked; refused",
                ask.asked,
                quoted(&key.0),
                quoted(&key.1)
            );
            continue;
        }
        if out.contains_key(&key) {
            log::debug!(
                "{}: {server} sent two URLs for object {}; the first is kept",
                ask.asked,
                quoted(&key.0)
            );
            continue;
        }
        let given = AccessUrlJson {
            url: line.url,
            headers: line.headers,
        };
        match checked_access(&given) {
            Ok(url) => {
                out.insert(key, url);
            }
            Err(why) => log::warn!(
                "{}: the URL {server} sent for object {} is refused: {why}",
                ask.asked,
                quoted(&key.0)
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(id: &str, access: &str) -> AccessWanted {
        AccessWanted {
            uri: DrsUri::parse(&format!("drs://h/{id}")).unwrap(),
            object_id: id.into(),
            access_id: access.into(),
        }
    }

    #[test]
    fn the_request_names_each_object_once_with_its_access_ids() {
        let (a, b, c) = (wanted("o1", "s3"), wanted("o1", "gs"), wanted("o2", "s3"));
        let body = request_body(&[&a, &b, &c, &a]);
        assert_eq!(
            body,
            serde_json::json!({"bulk_object_access_ids": [
                {"bulk_object_id": "o1", "bulk_access_ids": ["s3", "gs"]},
                {"bulk_object_id": "o2", "bulk_access_ids": ["s3"]},
            ]})
        );
    }
}
