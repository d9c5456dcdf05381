//! The DRS JSON of what the server holds: blobs and bundles as a test
//! stated them, Indexd records as Indexd renders them (checksum types with
//! Indexd's names, one access method per URL typed by its scheme). Only the
//! fields DRS 1.2 defines: its schemas refuse others in access methods.

use std::time::SystemTime;

use md5::Md5;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::indexd::IndexRecord;
use super::spec::AccessSpec;
use super::state::{Blob, Bundle, Entry, State};

/// Everything but RFC 3986's unreserved characters: a DRS id becomes one
/// path segment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Bundles nest at most this deep when expanded (a bundle may name itself).
const MAX_DEPTH: usize = 8;

pub(crate) fn encode_id(id: &str) -> String {
    utf8_percent_encode(id, SEGMENT).to_string()
}

/// A key as a URL path: each `/`-separated segment encoded.
pub(crate) fn encode_path(key: &str) -> String {
    key.split('/').map(encode_id).collect::<Vec<_>>().join("/")
}

/// The unsigned URL of an object's bytes here.
pub(crate) fn data_url(base_url: &str, id: &str) -> String {
    format!("{base_url}/data/{}", encode_id(id))
}

pub(crate) fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// How an id finds an Indexd record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// As Indexd's single lookup: the did with or without its prefix, or
    /// a `baseid` (`indexd::find`).
    Lenient,
    /// As Indexd's bulk lookup: the exact did only.
    Exact,
}

/// The DRS object `id`, from the objects (by their exact id) or the
/// Indexd records (found as `lookup` says).
pub(crate) fn drs_object(
    state: &State,
    base_url: &str,
    id: &str,
    expand: bool,
    lookup: Lookup,
) -> Option<Value> {
    match state.objects.get(id) {
        Some(Entry::Blob(blob)) => Some(blob_json(base_url, id, blob)),
        Some(Entry::Bundle(bundle)) => Some(bundle_json(state, base_url, id, bundle, expand, 0)),
        None => match lookup {
            Lookup::Lenient => super::indexd::find(state, id).map(record_json),
            Lookup::Exact => state.records.get(id).map(record_json),
        },
    }
}

/// `drs://HOST:PORT/ID`, the hostname form.
fn self_uri(base_url: &str, id: &str) -> String {
    let host = base_url.split_once("://").map_or(base_url, |(_, h)| h);
    format!("drs://{host}/{}", encode_id(id))
}

/// The fields every DRS object has.
fn common(
    base_url: &str,
    id: &str,
    name: Option<&str>,
    size: u64,
    created: SystemTime,
) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("id".into(), id.into());
    if let Some(name) = name {
        object.insert("name".into(), name.into());
    }
    object.insert("self_uri".into(), self_uri(base_url, id).into());
    object.insert("size".into(), size.into());
    object.insert("created_time".into(), rfc3339(created).into());
    object.insert("updated_time".into(), rfc3339(created).into());
    object
}

fn checksums_json(checksums: &[(String, String)]) -> Value {
    checksums
        .iter()
        .map(|(kind, hex)| json!({ "type": kind, "checksum": hex }))
        .collect()
}

fn blob_json(base_url: &str, id: &str, blob: &Blob) -> Value {
    let mut object = common(base_url, id, blob.name.as_deref(), blob.size, blob.created);
    object.insert("checksums".into(), checksums_json(&blob.checksums));
    let methods: Vec<Value> = blob
        .access
        .iter()
        .map(|a| access_method_json(base_url, id, a))
        .collect();
    object.insert("access_methods".into(), methods.into());
    object.into()
}

fn access_method_json(base_url: &str, id: &str, access: &AccessSpec) -> Value {
    match access {
        AccessSpec::Served { headers } => {
            let mut url = json!({ "url": data_url(base_url, id) });
            if !headers.is_empty() {
                url["headers"] = json!(headers);
            }
            json!({ "type": "https", "access_url": url })
        }
        AccessSpec::Url { kind, url, headers } => {
            let mut url = json!({ "url": url });
            if !headers.is_empty() {
                url["headers"] = json!(headers);
            }
            json!({ "type": kind, "access_url": url })
        }
        AccessSpec::Signed {
            access_id,
            raw: None,
            ..
        } => json!({ "type": "https", "access_id": access_id }),
        AccessSpec::Signed {
            access_id,
            raw: Some(raw),
            ..
        } => {
            let kind = raw.split_once("://").map_or("https", |(scheme, _)| scheme);
            json!({ "type": kind, "access_id": access_id, "access_url": { "url": raw } })
        }
    }
}

/// A bundle: its size is its members' total and its checksums, per type all
/// its members have, the digest of their sorted concatenation (the rule
/// the DRS spec gives). Members that are themselves bundles list their own
/// contents only when expanded.
fn bundle_json(
    state: &State,
    base_url: &str,
    id: &str,
    bundle: &Bundle,
    expand: bool,
    depth: usize,
) -> Value {
    let size = bundle_size(state, bundle, depth);
    let mut object = common(base_url, id, bundle.name.as_deref(), size, bundle.created);
    let sums = bundle_sums(state, bundle, depth);
    object.insert("checksums".into(), checksums_json(&sums));
    let contents: Vec<Value> = bundle
        .contents
        .iter()
        .map(|(name, member)| contents_json(state, base_url, name, member, expand, depth))
        .collect();
    object.insert("contents".into(), contents.into());
    object.into()
}

fn contents_json(
    state: &State,
    base_url: &str,
    name: &str,
    id: &str,
    expand: bool,
    depth: usize,
) -> Value {
    let mut item = json!({ "name": name, "id": id, "drs_uri": [self_uri(base_url, id)] });
    if let (true, Some(Entry::Bundle(inner))) = (expand && depth < MAX_DEPTH, state.objects.get(id))
    {
        let nested: Vec<Value> = inner
            .contents
            .iter()
            .map(|(name, member)| contents_json(state, base_url, name, member, true, depth + 1))
            .collect();
        item["contents"] = nested.into();
    }
    item
}

/// The members of a bundle that exist, as entries (none past MAX_DEPTH).
fn members<'a>(
    state: &'a State,
    bundle: &'a Bundle,
    depth: usize,
) -> impl Iterator<Item = &'a Entry> {
    let ids = if depth < MAX_DEPTH {
        &bundle.contents[..]
    } else {
        &[]
    };
    ids.iter().filter_map(|(_, id)| state.objects.get(id))
}

fn bundle_size(state: &State, bundle: &Bundle, depth: usize) -> u64 {
    members(state, bundle, depth)
        .map(|entry| match entry {
            Entry::Blob(blob) => blob.size,
            Entry::Bundle(inner) => bundle_size(state, inner, depth + 1),
        })
        .sum()
}

fn bundle_sums(state: &State, bundle: &Bundle, depth: usize) -> Vec<(String, String)> {
    let sums: Vec<Vec<(String, String)>> = members(state, bundle, depth)
        .map(|entry| match entry {
            Entry::Blob(blob) => blob.checksums.clone(),
            Entry::Bundle(inner) => bundle_sums(state, inner, depth + 1),
        })
        .collect();
    bundle_checksums(&sums)
}

/// Per digest this server can compute (`md5`, `sha-256`) that every member
/// lists: the digest of the members' sorted, concatenated hex values.
fn bundle_checksums(members: &[Vec<(String, String)>]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for kind in ["sha-256", "md5"] {
        let mut hexes: Vec<&str> = Vec::new();
        for sums in members {
            match sums.iter().find(|(k, _)| k == kind) {
                Some((_, hex)) => hexes.push(hex),
                None => break,
            }
        }
        if hexes.len() != members.len() {
            continue;
        }
        hexes.sort_unstable();
        let joined = hexes.concat();
        let digest = match kind {
            "md5" => hex::encode(Md5::digest(joined.as_bytes())),
            _ => hex::encode(Sha256::digest(joined.as_bytes())),
        };
        out.push((kind.to_string(), digest));
    }
    out
}

/// An Indexd record as Indexd's own DRS endpoint renders it: one access
/// method per URL with the scheme as both `type` and `access_id` beside
/// the raw `access_url` (Fence answers the access id); a blank one with
/// `"size": null`, `"form": null` and empty lists, as Indexd does.
pub(crate) fn record_json(record: &IndexRecord) -> Value {
    let checksums: Vec<Value> = record
        .hashes
        .iter()
        .map(|(kind, hex)| json!({ "type": kind, "checksum": hex }))
        .collect();
    let methods: Vec<Value> = record
        .urls
        .iter()
        .map(|url| {
            let scheme = url.split_once("://").map_or("file", |(s, _)| s);
            json!({ "type": scheme, "access_id": scheme, "access_url": { "url": url } })
        })
        .collect();
    let mut object = json!({
        "id": record.did,
        "self_uri": record.self_uri(),
        "size": record.size,
        "created_time": rfc3339(record.created),
        "updated_time": rfc3339(record.created),
        "version": record.rev,
        "form": record.form,
        "checksums": checksums,
        "access_methods": methods,
    });
    if let Some(name) = &record.file_name {
        object["name"] = name.as_str().into();
    }
    object
}
