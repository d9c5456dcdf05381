//! What DRS servers answer (serde), and the readings drsd takes from it:
//! the checksums that identify content ([`DrsObject::sha256`], `md5`,
//! `etag`) and the access URL to fetch from ([`AccessUrl`]).
//!
//! Checksum types are matched without case, `sha-256` (the IANA name the
//! spec asks for) and `sha256` (what Indexd emits) alike; values are hex of
//! either case. A value that is not what its type says, or two values of
//! one type that disagree, identify nothing: the sha-256 is then an error
//! (it would become an object's content id), the md5 and ETag are absent.
//!
//! Access URLs and their headers are secrets (signed URLs, bearer
//! headers): `Debug` shows URLs redacted and header names only.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use super::DrsError;
use crate::pool::Oid;
use crate::stores::SecretUrl;

/// A DRS object, as `GET /objects/{id}` answers it (the fields drsd reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrsObject {
    pub id: String,
    #[serde(default)]
    pub self_uri: Option<String>,
    pub size: u64,
    #[serde(default, deserialize_with = "nullable")]
    pub checksums: Vec<Checksum>,
    #[serde(default, deserialize_with = "nullable")]
    pub access_methods: Vec<AccessMethod>,
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checksum {
    pub checksum: String,
    pub r#type: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessMethod {
    pub r#type: String,
    #[serde(default)]
    pub access_url: Option<AccessUrlJson>,
    #[serde(default)]
    pub access_id: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
}

/// An access URL as the spec writes it: headers as `"Name: value"` lines.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessUrlJson {
    pub url: SecretUrl,
    #[serde(default, deserialize_with = "nullable")]
    pub headers: Vec<String>,
}

impl fmt::Debug for AccessUrlJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self
            .headers
            .iter()
            .map(|h| h.split(':').next().unwrap_or_default().trim())
            .collect();
        write!(f, "AccessUrlJson({:?}, headers {names:?})", self.url)
    }
}

/// Where to fetch an object's bytes, and the headers to send with each
/// request there.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessUrl {
    pub url: SecretUrl,
    pub headers: Vec<(String, String)>,
}

impl fmt::Debug for AccessUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        write!(f, "AccessUrl({:?}, headers {names:?})", self.url)
    }
}

/// What an answer's object is, read on its own: one object a bulk answer
/// cannot be read as does not spoil the others.
#[derive(Debug)]
pub(super) enum Read {
    Object(DrsObject),
    /// A blank Gen3 record (`POST /index/blank/`: an upload begun through
    /// Fence and not finished): `"size": null`, no checksums, no access
    /// method. It names no content yet.
    Blank,
    /// Not a DRS object drsd can read: why, without the values.
    Malformed(String),
}

/// Why a blank record is refused, for the user.
pub(super) const BLANK: &str = "its upload is not finished (a blank record: no size, no checksums, no access method); add it once the upload is done";

impl Read {
    /// `value` as a DRS object (see [`Read`]).
    pub(super) fn of(value: serde_json::Value) -> Read {
        let empty = |key: &str| {
            value
                .get(key)
                .is_none_or(|v| v.is_null() || v.as_array().is_some_and(|a| a.is_empty()))
        };
        if value.get("size").is_none_or(|s| s.is_null()) && empty("checksums") {
            return Read::Blank;
        }
        match serde_json::from_value(value) {
            Ok(object) => Read::Object(object),
            Err(e) => Read::Malformed(super::call::json_error(&e)),
        }
    }
}

/// The `id` an answer's object gives, if a string.
pub(super) fn id_of(value: &serde_json::Value) -> Option<&str> {
    value.get("id")?.as_str()
}

/// A `null` where a list belongs reads as an empty list (Indexd writes
/// `null` for what it does not have).
pub(super) fn nullable<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<Vec<T>>::deserialize(d).map(Option::unwrap_or_default)
}

impl DrsObject {
    /// The content's sha256, when the server gives one; an error when it
    /// gives one that is not 64 hex digits, or two that disagree.
    pub fn sha256(&self) -> Result<Option<Oid>, DrsError> {
        let mut found: Option<Oid> = None;
        for value in self.values_of("sha256") {
            let oid = value.to_ascii_lowercase().parse::<Oid>().map_err(|_| {
                self.bad(format!(
                    "its sha-256 checksum {} is not 64 hex digits",
                    quoted(value)
                ))
            })?;
            match found {
                Some(seen) if seen != oid => {
                    return Err(self.bad(format!(
                        "it has two sha-256 checksums that disagree: {seen} and {oid}"
                    )))
                }
                _ => found = Some(oid),
            }
        }
        Ok(found)
    }

    /// The md5, 32 lowercase hex digits, when the server gives exactly one.
    pub fn md5(&self) -> Option<String> {
        agreed(self.values_of("md5").map(|v| {
            let v = v.to_ascii_lowercase();
            (v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit())).then_some(v)
        }))
    }

    /// The ETag, quotes removed, when the server gives exactly one that is
    /// printable ASCII without blanks.
    pub fn etag(&self) -> Option<String> {
        agreed(self.values_of("etag").map(|v| {
            let v = v.trim_matches('"');
            let ok = !v.is_empty()
                && v.len() <= 200
                && v.bytes().all(|b| b.is_ascii_graphic() && b != b'"');
            ok.then(|| v.to_string())
        }))
    }

    /// Ok when the object carries a checksum drsd can identify its content
    /// by (a sha-256, an md5 or an ETag); else an error naming the types it
    /// does carry.
    pub fn require_checksum(&self) -> Result<(), DrsError> {
        if self.sha256()?.is_some() || self.md5().is_some() || self.etag().is_some() {
            return Ok(());
        }
        let types: Vec<String> = self.checksums.iter().map(|c| quoted(&c.r#type)).collect();
        Err(DrsError::UnknownChecksum {
            object: self.shown(),
            types: if types.is_empty() {
                "none".into()
            } else {
                types.join(", ")
            },
        })
    }

    /// The object as messages name it: its `self_uri`, else its id.
    pub fn shown(&self) -> String {
        let name = self.self_uri.as_deref().unwrap_or(&self.id);
        format!("DRS object {}", quoted(name))
    }

    /// The values of the checksums whose type is `kind`, ignoring case and
    /// `-` (`SHA-256` is `sha256`).
    fn values_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.checksums
            .iter()
            .filter(move |c| {
                let t: String = c.r#type.chars().filter(|ch| *ch != '-').collect();
                t.eq_ignore_ascii_case(kind)
            })
            .map(|c| c.checksum.trim())
    }

    fn bad(&self, why: String) -> DrsError {
        DrsError::BadChecksum {
            object: self.shown(),
            why,
        }
    }
}

/// The one value all of `values` agree on; `None` when there is none, one
/// is malformed (`None` inside), or two differ.
fn agreed(values: impl Iterator<Item = Option<String>>) -> Option<String> {
    let mut found: Option<String> = None;
    for value in values {
        let value = value?;
        if found.as_ref().is_some_and(|f| *f != value) {
            return None;
        }
        found = Some(value);
    }
    found
}

/// A server's text for a message: shortened, quoted, control characters
/// escaped, so it can forge no log line.
pub(super) fn quoted(text: &str) -> String {
    let short: String = text.chars().take(120).collect();
    format!("{short:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(checksums: &[(&str, &str)]) -> DrsObject {
        DrsObject {
            id: "dg.TEST/u1".into(),
            self_uri: Some("drs://dg.TEST:u1".into()),
            size: 3,
            checksums: checksums
                .iter()
                .map(|(t, v)| Checksum {
                    r#type: t.to_string(),
                    checksum: v.to_string(),
                })
                .collect(),
            access_methods: vec![],
            name: None,
        }
    }

    const SHA: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn the_sha256_is_found_under_either_spelling_and_any_case() {
        for kind in ["sha-256", "sha256", "SHA-256", "Sha256"] {
            let got = object(&[("md5", "x"), (kind, &SHA.to_uppercase())])
                .sha256()
                .unwrap();
            assert_eq!(got, Some(SHA.parse().unwrap()), "{kind}");
        }
        assert_eq!(object(&[("md5", "x")]).sha256().unwrap(), None);
    }

    #[test]
    fn a_malformed_or_contradicted_sha256_is_an_error_naming_the_object() {
        let err = object(&[("sha256", "abc\n")])
            .sha256()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("drs://dg.TEST:u1") && err.contains("64 hex"),
            "{err}"
        );
        let other = "0".repeat(64);
        let err = object(&[("sha256", SHA), ("sha-256", &other)])
            .sha256()
            .unwrap_err()
            .to_string();
        assert!(err.contains("disagree"), "{err}");
        assert!(object(&[("sha256", SHA), ("sha-256", SHA)])
            .sha256()
            .is_ok());
    }

    #[test]
    fn the_md5_is_lowercase_hex_and_only_when_unambiguous() {
        let md5 = "900150983CD24FB0D6963F7D28E17F72";
        assert_eq!(object(&[("MD5", md5)]).md5(), Some(md5.to_lowercase()));
        assert_eq!(
            object(&[("md5", "not-hex-at-all-but-32-chars-long")]).md5(),
            None
        );
        assert_eq!(
            object(&[("md5", md5), ("md5", &"1".repeat(32))]).md5(),
            None
        );
        assert_eq!(object(&[]).md5(), None);
    }

    #[test]
    fn the_etag_loses_its_quotes_and_must_be_printable() {
        assert_eq!(
            object(&[("etag", "\"9bb58f26192e4ba00f01e2e7b136bbd8-3\"")]).etag(),
            Some("9bb58f26192e4ba00f01e2e7b136bbd8-3".into())
        );
        assert_eq!(object(&[("etag", "a b")]).etag(), None);
        assert_eq!(object(&[("etag", "\"\"")]).etag(), None);
    }

    #[test]
    fn an_object_without_a_usable_checksum_names_what_it_has() {
        let err = object(&[("crc32c", "abc"), ("trunc512", "def")])
            .require_checksum()
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"crc32c\", \"trunc512\""), "{err}");
        assert!(object(&[("etag", "e1")]).require_checksum().is_ok());
    }

    #[test]
    fn an_indexd_answer_with_nulls_reads() {
        let json = serde_json::json!({
            "id": "dg.TEST/u1", "self_uri": "drs://dg.TEST:u1", "size": 5,
            "checksums": [{"checksum": SHA, "type": "sha256"}],
            "access_methods": null, "name": null, "description": null,
            "aliases": [], "form": "object"
        });
        let got: DrsObject = serde_json::from_value(json).unwrap();
        assert!(got.access_methods.is_empty());
        assert_eq!(got.sha256().unwrap(), Some(SHA.parse().unwrap()));
    }

    #[test]
    fn a_blank_indexd_record_reads_as_blank_and_a_bad_one_as_malformed_without_its_values() {
        let blank = serde_json::json!({
            "id": "dg.TEST/u1", "self_uri": "drs://dg.TEST:u1", "size": null,
            "form": null, "checksums": [], "access_methods": [], "name": "x.bam"
        });
        assert!(matches!(Read::of(blank), Read::Blank));
        let no_size = serde_json::json!({
            "id": "u2", "size": null, "checksums": [{"type": "md5", "checksum": "s3cr3t"}]
        });
        let Read::Malformed(why) = Read::of(no_size) else {
            panic!("a record with checksums and no size is not blank");
        };
        assert!(
            why.contains("not the JSON expected") && !why.contains("s3cr3t"),
            "{why}"
        );
        let good = serde_json::json!({"id": "u3", "size": 3, "checksums": []});
        assert!(matches!(Read::of(good), Read::Object(o) if o.id == "u3"));
    }

    #[test]
    fn debug_prints_no_signature_and_no_header_value() {
        let json = serde_json::json!({
            "type": "https",
            "access_url": {
                "url": "https://h/x?X-Amz-Signature=s3cr3t",
                "headers": ["Authorization: Bearer t0ken"]
            }
        });
        let method: AccessMethod = serde_json::from_value(json).unwrap();
        let shown = format!("{method:?}");
        assert!(
            !shown.contains("s3cr3t") && !shown.contains("t0ken"),
            "{shown}"
        );
        assert!(shown.contains("Authorization"), "{shown}");
        let url = AccessUrl {
            url: SecretUrl::new("https://h/x?sig=s3cr3t"),
            headers: vec![("Authorization".into(), "Bearer t0ken".into())],
        };
        let shown = format!("{url:?}");
        assert!(
            !shown.contains("s3cr3t") && !shown.contains("t0ken"),
            "{shown}"
        );
    }
}
