//! Many DRS objects at once: grouped by server, each distinct URI asked
//! once, in bulk (`POST /objects {bulk_object_ids}`, DRS 1.4) where the
//! server does it, else by concurrent single GETs.
//!
//! What a server does is learned once per server and kept for the
//! client's life: its service-info's `maxBulkRequestLength` (top level in
//! DRS 1.4, under `drs` later) is the batch size; a server that does not
//! say is tried with batches of [`GUESSED_BATCH`], and one that answers a
//! batch 404, 405 or 501 does no bulk (Indexd among them). A server that
//! declared bulk and answers a batch 404 has none of those objects: they
//! are asked one by one, and it keeps its bulk. A 413 splits the batch in
//! halves, and later batches to that server are no larger.
//!
//! Every bulk answer is checked against the batch, each object read on its
//! own: an object nobody asked for is ignored (and logged); one that cannot
//! be used (a blank Indexd record, an upload not finished; one drsd cannot
//! read) is an error for its URI alone, the others of the batch go on; a
//! URI the answer does not mention at all is an error for it alone.
//!
//! An id the server reports unresolved is asked once more by a single GET
//! before it is called missing: Gen3 Indexd's bulk lookup matches the exact
//! did only, where its single lookup also takes the did without its prefix
//! or with it, and a `baseid` (`client.rs` and `DrsUri::is_named_by` match
//! its answers the same way). So `drs://HOST/<uuid>` for the record
//! `dg.XXXX/<uuid>`, and Indexd's own `self_uri` of a did without prefix,
//! resolve.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use futures_util::stream::{self, StreamExt};
use reqwest::StatusCode;
use serde::Deserialize;

use super::call::{self, Ask};
use super::client::{blank, check_object};
use super::model::{id_of, nullable, quoted, DrsObject, Read};
use super::servers::below;
use super::{DrsClient, DrsError, DrsUri};
use crate::stores::shown_url;

/// The batch size tried on a server whose service-info does not say.
pub(super) const GUESSED_BATCH: usize = 100;

/// The largest batch sent, whatever a server declares: its answer is read
/// into memory whole.
const MAX_BATCH: usize = 1000;

/// Single GETs in flight at once, per lookup, where there is no bulk.
const IN_FLIGHT: usize = 32;

/// Bulk requests in flight at once, per lookup: 1,000 ids in batches of 100
/// take two round trips, not ten.
const BATCHES_IN_FLIGHT: usize = 8;

/// What a server was learned to do with bulk lookups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bulk {
    /// Batches of at most `size` ids; `declared` when its service-info
    /// said so.
    Batches {
        size: usize,
        declared: bool,
    },
    Unsupported,
}

const GUESSED: Bulk = Bulk::Batches {
    size: GUESSED_BATCH,
    declared: false,
};

type Answer = Result<DrsObject, DrsError>;

/// How one batch went.
enum Posted {
    /// Per URI its answer, or `None` to ask it by a single GET.
    Answered(Vec<Option<Answer>>),
    /// 413: the batch must be smaller.
    TooLarge,
    /// A 404 from a server that declared bulk: none of these is there.
    NoneThere,
    /// 404, 405 or 501 from a server that did not declare bulk.
    Unsupported,
}

#[derive(Deserialize)]
struct ServiceInfo {
    #[serde(rename = "maxBulkRequestLength")]
    max_bulk: Option<u64>,
    drs: Option<DrsInfo>,
}

#[derive(Deserialize)]
struct DrsInfo {
    #[serde(rename = "maxBulkRequestLength")]
    max_bulk: Option<u64>,
}

impl ServiceInfo {
    fn bulk(&self) -> Bulk {
        let declared = self.drs.as_ref().and_then(|d| d.max_bulk).or(self.max_bulk);
        match declared.filter(|n| *n >= 1) {
            Some(n) => Bulk::Batches {
                size: usize::try_from(n).unwrap_or(MAX_BATCH).min(MAX_BATCH),
                declared: true,
            },
            None => GUESSED,
        }
    }
}

#[derive(Deserialize)]
struct BulkAnswer {
    /// Read one by one ([`Read::of`]): one blank record must not make the
    /// whole batch unreadable.
    #[serde(default, alias = "resolved_drs_objects", deserialize_with = "nullable")]
    resolved_drs_object: Vec<serde_json::Value>,
    #[serde(
        default,
        alias = "unresolved_drs_object",
        deserialize_with = "nullable"
    )]
    unresolved_drs_objects: Vec<Unresolved>,
}

#[derive(Deserialize)]
struct Unresolved {
    // `error_code` is not read: whatever the code, the id is asked once
    // more by a single GET, whose answer is final.
    #[serde(default, deserialize_with = "nullable")]
    object_ids: Vec<String>,
}

impl DrsClient {
    /// The objects `uris` name, in the order given (see the module notes).
    pub async fn objects(&self, uris: &[DrsUri]) -> Vec<Result<DrsObject, DrsError>> {
        let mut out: Vec<Option<Answer>> = (0..uris.len()).map(|_| None).collect();
        let mut by_server: BTreeMap<String, (url::Url, Vec<usize>)> = BTreeMap::new();
        for (i, uri) in uris.iter().enumerate() {
            match self.servers().base_url(uri) {
                Ok(base) => by_server
                    .entry(base.to_string())
                    .or_insert_with(|| (base, Vec::new()))
                    .1
                    .push(i),
                Err(e) => out[i] = Some(Err(e.into())),
            }
        }
        let lookups = by_server.into_values().map(|(base, at)| async move {
            let asked: Vec<&DrsUri> = at.iter().map(|&i| &uris[i]).collect();
            let got = self.of_server(&base, &asked).await;
            (at, got)
        });
        for (at, got) in futures_util::future::join_all(lookups).await {
            for (i, answer) in at.into_iter().zip(got) {
                out[i] = Some(answer);
            }
        }
        out.into_iter()
            .map(|a| a.expect("every URI is answered"))
            .collect()
    }

    /// `uris`, all of the server at `base`, answered in order; a URI given
    /// twice is asked once.
    async fn of_server(&self, base: &url::Url, uris: &[&DrsUri]) -> Vec<Answer> {
        let mut distinct: Vec<&DrsUri> = Vec::new();
        let mut index: HashMap<&DrsUri, usize> = HashMap::new();
        let slots: Vec<usize> = uris
            .iter()
            .map(|&uri| {
                *index.entry(uri).or_insert_with(|| {
                    distinct.push(uri);
                    distinct.len() - 1
                })
            })
            .collect();
        let answers = self.distinct_of_server(base, &distinct).await;
        slots.into_iter().map(|k| answers[k].clone()).collect()
    }

    async fn distinct_of_server(&self, base: &url::Url, uris: &[&DrsUri]) -> Vec<Answer> {
        let mut answers: Vec<Option<Answer>> = (0..uris.len()).map(|_| None).collect();
        if let Bulk::Batches { size, declared } = self.bulk_mode(base).await {
            self.in_batches(base, uris, size, declared, &mut answers)
                .await;
        }
        let left: Vec<usize> = (0..uris.len()).filter(|&i| answers[i].is_none()).collect();
        // The futures are made before the stream, by value: a closure over
        // `&usize` inside the stream makes the whole future `Send` only for
        // one lifetime, and a spawned handler needs it for all.
        let asks: Vec<_> = left.iter().map(|&i| self.object(uris[i])).collect();
        let singles: Vec<Answer> = stream::iter(asks).buffered(IN_FLIGHT).collect().await;
        for (i, answer) in left.into_iter().zip(singles) {
            answers[i] = Some(answer);
        }
        answers
            .into_iter()
            .map(|a| a.expect("every URI is answered"))
            .collect()
    }

    /// Answers what bulk requests can into `answers`; what they leave
    /// `None` is asked one by one.
    async fn in_batches(
        &self,
        base: &url::Url,
        uris: &[&DrsUri],
        size: usize,
        declared: bool,
        answers: &mut [Option<Answer>],
    ) {
        let mut todo = batches(uris.len(), size);
        todo.reverse();
        // A server that did not declare bulk is probed with one batch first.
        let mut known = declared;
        while !todo.is_empty() {
            // A few batches at once: one round trip per wave, not per batch.
            let at_once = if known { BATCHES_IN_FLIGHT } else { 1 };
            let wave: Vec<Range<usize>> = (0..at_once).map_while(|_| todo.pop()).collect();
            let posts: Vec<_> = wave
                .iter()
                .map(|r| self.post_batch(base, &uris[r.clone()], declared))
                .collect();
            let posted = futures_util::future::join_all(posts).await;
            for (range, result) in wave.into_iter().zip(posted) {
                match result {
                    Ok(Posted::Answered(got)) => {
                        known = true;
                        for (slot, answer) in answers[range].iter_mut().zip(got) {
                            *slot = answer;
                        }
                    }
                    Ok(Posted::TooLarge) if range.len() > 1 => {
                        let mid = range.start + range.len() / 2;
                        self.shrink(base, range.end - mid);
                        todo.push(mid..range.end);
                        todo.push(range.start..mid);
                    }
                    Ok(Posted::TooLarge | Posted::NoneThere) => {}
                    Ok(Posted::Unsupported) => {
                        self.remember(base, Bulk::Unsupported);
                        return;
                    }
                    Err(e) => fill(answers, range.clone(), vec![Err(e); range.len()]),
                }
            }
        }
    }

    async fn post_batch(
        &self,
        base: &url::Url,
        uris: &[&DrsUri],
        declared: bool,
    ) -> Result<Posted, DrsError> {
        let url = below(base, &["objects"]).map_err(|why| DrsError::BadAnswer {
            asked: "bulk lookup".into(),
            server: shown_url(base),
            why: why.to_string(),
        })?;
        let ids: Vec<&str> = uris.iter().map(|u| u.id()).collect();
        let body = serde_json::json!({ "bulk_object_ids": ids })
            .to_string()
            .into_bytes();
        let asked = bulk_asked(uris);
        let ask = Ask {
            asked: &asked,
            server: base,
            accept: &[
                StatusCode::NOT_FOUND,
                StatusCode::METHOD_NOT_ALLOWED,
                StatusCode::PAYLOAD_TOO_LARGE,
                StatusCode::NOT_IMPLEMENTED,
            ],
            build: &|http| call::post_json(http, &url, &body),
        };
        let resp = self.caller.send(&ask).await?;
        Ok(match resp.status() {
            StatusCode::PAYLOAD_TOO_LARGE => Posted::TooLarge,
            StatusCode::NOT_FOUND if declared => Posted::NoneThere,
            StatusCode::NOT_FOUND
            | StatusCode::METHOD_NOT_ALLOWED
            | StatusCode::NOT_IMPLEMENTED => Posted::Unsupported,
            _ => {
                let answer: BulkAnswer = call::read_json(resp, &ask).await?;
                Posted::Answered(matched(uris, &answer, &ask))
            }
        })
    }

    /// What the server at `base` does with bulk lookups, learned from its
    /// service-info on first use.
    pub(super) async fn bulk_mode(&self, base: &url::Url) -> Bulk {
        if let Some(mode) = crate::lock::lock(&self.bulk).get(base.as_str()) {
            return *mode;
        }
        match self.service_info(base).await {
            Ok(mode) => {
                self.remember(base, mode);
                mode
            }
            Err(e) => {
                log::info!("{e}; trying bulk lookups of {GUESSED_BATCH}");
                GUESSED
            }
        }
    }

    /// The bulk mode service-info declares (a 404: none declared).
    async fn service_info(&self, base: &url::Url) -> Result<Bulk, DrsError> {
        let url = below(base, &["service-info"]).map_err(|why| DrsError::BadAnswer {
            asked: "service-info".into(),
            server: shown_url(base),
            why: why.to_string(),
        })?;
        let ask = Ask {
            asked: "service-info",
            server: base,
            accept: &[StatusCode::NOT_FOUND],
            build: &|http| http.get(url.clone()),
        };
        let resp = self.caller.send(&ask).await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(GUESSED);
        }
        let info: ServiceInfo = call::read_json(resp, &ask).await?;
        Ok(info.bulk())
    }

    fn remember(&self, base: &url::Url, mode: Bulk) {
        crate::lock::lock(&self.bulk).insert(base.to_string(), mode);
    }

    /// After a 413: batches to `base` no larger than `size` from now on.
    fn shrink(&self, base: &url::Url, size: usize) {
        let mut modes = crate::lock::lock(&self.bulk);
        if let Some(Bulk::Batches { size: kept, .. }) = modes.get_mut(base.as_str()) {
            *kept = (*kept).min(size.max(1));
        }
    }
}

/// `0..len` cut into ranges of at most `size`.
fn batches(len: usize, size: usize) -> Vec<Range<usize>> {
    let size = size.max(1);
    (0..len)
        .step_by(size)
        .map(|start| start..(start + size).min(len))
        .collect()
}

fn fill(answers: &mut [Option<Answer>], range: Range<usize>, got: Vec<Answer>) {
    for (slot, answer) in answers[range].iter_mut().zip(got) {
        *slot = Some(answer);
    }
}

/// `bulk lookup of 3 DRS objects (drs://a, drs://b, drs://c)`, naming at
/// most three.
fn bulk_asked(uris: &[&DrsUri]) -> String {
    let named: Vec<&str> = uris.iter().take(3).map(|u| u.as_str()).collect();
    let more = if uris.len() > 3 { ", ..." } else { "" };
    format!(
        "bulk lookup of {} DRS objects ({}{more})",
        uris.len(),
        named.join(", ")
    )
}

/// Each URI's answer in `answer`, checked against what was asked; `None`
/// for a URI the server lists unresolved, to be asked by a single GET.
fn matched(uris: &[&DrsUri], answer: &BulkAnswer, ask: &Ask<'_>) -> Vec<Option<Answer>> {
    let resolved: Vec<(Option<&str>, &serde_json::Value)> = answer
        .resolved_drs_object
        .iter()
        .map(|value| (id_of(value), value))
        .collect();
    for (id, _) in &resolved {
        if !id.is_some_and(|id| uris.iter().any(|u| u.is_named_by(id))) {
            log::warn!(
                "{}: {} answered with the object {}, which was not asked; ignored",
                ask.asked,
                shown_url(ask.server),
                id.map_or("without an id".into(), quoted)
            );
        }
    }
    uris.iter()
        .map(|uri| one_of(uri, &resolved, answer, ask))
        .collect()
}

fn one_of(
    uri: &DrsUri,
    resolved: &[(Option<&str>, &serde_json::Value)],
    answer: &BulkAnswer,
    ask: &Ask<'_>,
) -> Option<Answer> {
    let exact = resolved.iter().find(|(id, _)| *id == Some(uri.id()));
    let named = || {
        resolved
            .iter()
            .find(|(id, _)| id.is_some_and(|id| uri.is_named_by(id)))
    };
    let server = shown_url(ask.server);
    if let Some((_, value)) = exact.or_else(named) {
        let bad = |why: String| DrsError::BadAnswer {
            asked: uri.to_string(),
            server: server.clone(),
            why,
        };
        return Some(match Read::of((*value).clone()) {
            Read::Object(object) => check_object(&object, uri, false)
                .map(|()| object)
                .map_err(|why| bad(why.to_string())),
            Read::Blank => Err(blank(uri, ask.server)),
            Read::Malformed(why) => Err(bad(why)),
        });
    }
    let unresolved = answer
        .unresolved_drs_objects
        .iter()
        .any(|u| u.object_ids.iter().any(|id| uri.is_named_by(id)));
    if unresolved {
        return None;
    }
    Some(Err(DrsError::BadAnswer {
        asked: uri.to_string(),
        server,
        why: "the bulk answer names it neither resolved nor unresolved".into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_cover_every_index_once_in_order_and_none_is_larger_than_asked() {
        assert_eq!(batches(5, 2), vec![0..2, 2..4, 4..5]);
        assert_eq!(batches(4, 4), vec![0..4]);
        assert_eq!(batches(0, 3), Vec::<Range<usize>>::new());
        assert_eq!(batches(2, 0), vec![0..1, 1..2], "a size of 0 is 1");
    }

    #[test]
    fn service_info_declares_the_batch_size_at_the_top_or_under_drs() {
        let read = |v: serde_json::Value| serde_json::from_value::<ServiceInfo>(v).unwrap().bulk();
        let declared = |size| Bulk::Batches {
            size,
            declared: true,
        };
        assert_eq!(
            read(serde_json::json!({"maxBulkRequestLength": 7})),
            declared(7)
        );
        assert_eq!(
            read(serde_json::json!({"drs": {"maxBulkRequestLength": 9}})),
            declared(9)
        );
        assert_eq!(
            read(serde_json::json!({"drs": {"maxBulkRequestLength": 99999}})),
            declared(MAX_BATCH)
        );
        assert_eq!(
            read(serde_json::json!({"maxBulkRequestLength": 0})),
            GUESSED
        );
        assert_eq!(
            read(serde_json::json!({"id": "org.example", "type": {}})),
            GUESSED
        );
    }

    #[test]
    fn a_bulk_lookup_names_at_most_three_uris() {
        let uris: Vec<DrsUri> = (0..5)
            .map(|i| DrsUri::parse(&format!("drs://h/o{i}")).unwrap())
            .collect();
        let refs: Vec<&DrsUri> = uris.iter().collect();
        assert_eq!(
            bulk_asked(&refs),
            "bulk lookup of 5 DRS objects (drs://h/o0, drs://h/o1, drs://h/o2, ...)"
        );
    }
}
