//! Indexd's checks of a write's JSON body, as its JSON schemas make them
//! (`POST_RECORD_SCHEMA` for `POST /index/` and `POST /index/{did}`,
//! `PUT_RECORD_SCHEMA` for `PUT /index/{did}`): no property outside the
//! schema (`additionalProperties: false`), the required ones present, each
//! of the right type and pattern. The refusal is the first line of the
//! message Python's jsonschema gives, which is what Indexd puts in
//! `{"error": ...}` (400). This is what keeps a field drsd adds from
//! passing here and failing against a commons.

use serde_json::Value;

/// The hash names Indexd knows and each one's pattern: lower-case hex of a
/// fixed length, an `etag` with an optional `-N` part count.
const HASHES: [(&str, usize); 6] = [
    ("md5", 32),
    ("sha1", 40),
    ("sha256", 64),
    ("sha512", 128),
    ("crc", 8),
    ("etag", 32),
];

/// The properties of a new record, and their kinds.
const POST_FIELDS: [(&str, Kind); 16] = [
    ("baseid", Kind::Uuidish),
    ("form", Kind::Form),
    ("size", Kind::Size),
    ("file_name", Kind::Str),
    ("metadata", Kind::Object),
    ("urls_metadata", Kind::Object),
    ("version", Kind::Str),
    ("description", Kind::Str),
    ("uploader", Kind::Str),
    ("urls", Kind::Strings),
    ("acl", Kind::Strings),
    ("authz", Kind::Strings),
    ("did", Kind::Uuidish),
    ("content_created_date", Kind::Str),
    ("content_updated_date", Kind::Str),
    ("hashes", Kind::Hashes),
];

const POST_REQUIRED: [&str; 4] = ["size", "hashes", "urls", "form"];

/// What `PUT /index/{did}` may change: never `size` or `hashes`.
const PUT_FIELDS: [(&str, Kind); 11] = [
    ("urls", Kind::Strings),
    ("acl", Kind::Strings),
    ("authz", Kind::Strings),
    ("file_name", Kind::StrOrNull),
    ("version", Kind::StrOrNull),
    ("uploader", Kind::StrOrNull),
    ("metadata", Kind::Object),
    ("urls_metadata", Kind::Object),
    ("description", Kind::StrOrNull),
    ("content_created_date", Kind::StrOrNull),
    ("content_updated_date", Kind::StrOrNull),
];

#[derive(Debug, Clone, Copy)]
enum Kind {
    Str,
    StrOrNull,
    Strings,
    Object,
    Size,
    Form,
    /// A string ending in a UUID (`^.*<uuid>$`).
    Uuidish,
    Hashes,
}

/// The body of a new record or version, checked as `POST_RECORD_SCHEMA`.
pub(crate) fn check_post(body: &Value) -> Result<(), String> {
    check(body, &POST_FIELDS, &POST_REQUIRED)
}

/// The body of an update, checked as `PUT_RECORD_SCHEMA`.
pub(crate) fn check_put(body: &Value) -> Result<(), String> {
    check(body, &PUT_FIELDS, &[])
}

fn check(body: &Value, fields: &[(&str, Kind)], required: &[&str]) -> Result<(), String> {
    let Some(object) = body.as_object() else {
        return Err(format!("{} is not of type 'object'", py(body)));
    };
    let unexpected: Vec<String> = object
        .keys()
        .filter(|k| !fields.iter().any(|(name, _)| name == k))
        .map(|k| format!("'{k}'"))
        .collect();
    if !unexpected.is_empty() {
        let verb = if unexpected.len() == 1 { "was" } else { "were" };
        return Err(format!(
            "Additional properties are not allowed ({} {verb} unexpected)",
            unexpected.join(", ")
        ));
    }
    if let Some(missing) = required.iter().find(|r| !object.contains_key(**r)) {
        return Err(format!("'{missing}' is a required property"));
    }
    for (name, kind) in fields {
        if let Some(value) = object.get(*name) {
            check_kind(value, *kind)?;
        }
    }
    Ok(())
}

fn check_kind(value: &Value, kind: Kind) -> Result<(), String> {
    let not = |ty: &str| Err(format!("{} is not of type {ty}", py(value)));
    match kind {
        Kind::Str => value.as_str().map_or_else(|| not("'string'"), |_| Ok(())),
        Kind::StrOrNull if value.is_null() => Ok(()),
        Kind::StrOrNull => value
            .as_str()
            .map_or_else(|| not("'string', 'null'"), |_| Ok(())),
        Kind::Object => value
            .as_object()
            .map_or_else(|| not("'object'"), |_| Ok(())),
        Kind::Strings => match value.as_array() {
            None => not("'array'"),
            Some(items) => match items.iter().find(|i| !i.is_string()) {
                Some(item) => Err(format!("{} is not of type 'string'", py(item))),
                None => Ok(()),
            },
        },
        Kind::Size => match value.as_i64() {
            None if value.as_u64().is_some() => Ok(()),
            None => not("'integer'"),
            Some(n) if n < 0 => Err(format!("{n} is less than the minimum of 0")),
            Some(_) => Ok(()),
        },
        Kind::Form => match value.as_str() {
            Some("object" | "container" | "multipart") => Ok(()),
            _ => Err(format!(
                "{} is not one of ['object', 'container', 'multipart']",
                py(value)
            )),
        },
        Kind::Uuidish => match value.as_str() {
            None => not("'string'"),
            Some(s) if ends_in_uuid(s) => Ok(()),
            Some(s) => Err(format!("'{s}' does not match '^.*<uuid>$'")),
        },
        Kind::Hashes => check_hashes(value),
    }
}

/// Known names must match their pattern and one at least must be given
/// (the schema's `anyOf`); other names pass, as the schema lets them.
fn check_hashes(value: &Value) -> Result<(), String> {
    let Some(hashes) = value.as_object() else {
        return Err(format!("{} is not of type 'object'", py(value)));
    };
    for (name, len) in HASHES {
        if let Some(given) = hashes.get(name) {
            let fits = given.as_str().is_some_and(|s| valid_hash(name, len, s));
            if !fits {
                return Err(format!("{} does not match the {name} pattern", py(given)));
            }
        }
    }
    if !HASHES.iter().any(|(name, _)| hashes.contains_key(*name)) {
        return Err(format!(
            "{} is not valid under any of the given schemas",
            py(value)
        ));
    }
    Ok(())
}

fn valid_hash(name: &str, len: usize, value: &str) -> bool {
    let (hex, parts) = match (name, value.split_once('-')) {
        ("etag", Some((hex, parts))) => (hex, Some(parts)),
        _ => (value, None),
    };
    is_lower_hex(hex, len)
        && parts.is_none_or(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether `s` ends in a UUID (any case), as Indexd's did pattern asks.
pub(crate) fn ends_in_uuid(s: &str) -> bool {
    let Some(tail) = s.len().checked_sub(36).and_then(|at| s.get(at..)) else {
        return false;
    };
    tail.split('-').map(str::len).eq([8, 4, 4, 4, 12])
        && tail.bytes().all(|c| c == b'-' || c.is_ascii_hexdigit())
}

/// A JSON value roughly as Python prints it in jsonschema's messages.
fn py(value: &Value) -> String {
    match value {
        Value::String(s) => format!("'{s}'"),
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        other => other.to_string(),
    }
}
