//! The DRS client: an object's metadata by URI (`GET /objects/{id}`), many
//! at once (`bulk.rs`), and the URL its bytes are fetched from.
//!
//! Every answer is checked against what was asked: an object must name the
//! id asked (`DrsUri::is_named_by`) and have a size drsd can hold; an access
//! URL must be `https`, `http` or `s3` and its headers real header lines
//! that do not take over what drsd's own requests decide (ranges,
//! conditions, framing). Signed URLs come fresh from the server each time:
//! nothing here keeps one.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::StatusCode;

use super::auth::DrsAuth;
use super::bulk::Bulk;
use super::call::{self, Api, Ask, Caller, Pending};
use super::model::{quoted, AccessMethod, AccessUrl, AccessUrlJson, DrsObject, Read, BLANK};
use super::servers::{below, API_PATH};
use super::{DrsError, DrsServers, DrsUri};
use crate::stores::{shown_url, HttpConfig, SecretUrl};

/// Headers an access URL may not set: drsd's requests decide these.
const RESERVED_HEADERS: [&str; 8] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "range",
    "if-match",
    "if-none-match",
    "if-range",
];

/// Resolves DRS URIs against the servers of a [`DrsServers`] map.
pub struct DrsClient {
    pub(super) caller: Caller,
    servers: DrsServers,
    /// What each server (by base URL) was learned to do with bulk lookups.
    pub(super) bulk: Mutex<HashMap<String, Bulk>>,
    /// The servers (by base URL) found to have no bulk access URLs
    /// (`bulk_access.rs`).
    pub(super) no_bulk_access: Mutex<HashSet<String>>,
    /// Whether the Gen3 API key file, when one is configured, could be
    /// read for the commons that issued it.
    key_read: bool,
}

impl DrsClient {
    /// A client with its own connections; `auth` trusts the servers of
    /// `servers` (see `auth.rs`).
    pub fn new(
        http: &HttpConfig,
        servers: DrsServers,
        auth: DrsAuth,
    ) -> Result<DrsClient, DrsError> {
        Ok(DrsClient::with_api(Api::new(http)?, servers, auth))
    }

    /// A client on connections shared with others (the facade's). The
    /// commons that issued the Gen3 API key, when one is configured, is
    /// read from the key file here and joins `servers`.
    pub(crate) fn with_api(api: Api, servers: DrsServers, auth: DrsAuth) -> DrsClient {
        let (servers, key_read) = with_key_commons(servers, &auth);
        DrsClient {
            caller: Caller {
                api,
                auth: auth.trusting(&servers),
                pending: Pending::default(),
            },
            servers,
            bulk: Mutex::new(HashMap::new()),
            no_bulk_access: Mutex::new(HashSet::new()),
            key_read,
        }
    }

    /// Whether the Gen3 API key file (if one is configured) could be read
    /// when this client was built: a client built while it could not be
    /// knows nothing of its commons, and is worth building again.
    pub fn read_the_key(&self) -> bool {
        self.key_read
    }

    /// How long all the `202 Accepted` answers to one call may be waited
    /// for in all (default 60 s) before it fails as
    /// [`DrsError::StillPending`].
    pub fn with_pending_bound(mut self, bound: Duration) -> DrsClient {
        self.caller.pending.bound = bound;
        self
    }

    pub fn servers(&self) -> &DrsServers {
        &self.servers
    }

    /// The object `uri` names; [`DrsError::NotFound`] on a 404.
    pub async fn object(&self, uri: &DrsUri) -> Result<DrsObject, DrsError> {
        let server = self.servers.base_url(uri)?;
        let url = self.servers.object_url(uri)?;
        let ask = Ask {
            asked: uri.as_str(),
            server: &server,
            accept: &[StatusCode::NOT_FOUND],
            build: &|http| http.get(url.clone()),
        };
        let resp = self.caller.send(&ask).await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Err(not_found(uri, &server));
        }
        let value: serde_json::Value = call::read_json(resp, &ask).await?;
        let object = match Read::of(value) {
            Read::Object(object) => object,
            Read::Blank => return Err(blank(uri, &server)),
            Read::Malformed(why) => return Err(call::bad_answer(&ask, why)),
        };
        // Indexd answers a `baseid` with the newest of its versions, a
        // record of another did: taken when Indexd says so.
        let version =
            !uri.is_named_by(&object.id) && self.is_version_of(uri, &server, &object.id).await;
        if version {
            log::info!(
                "{uri}: {} answered with its newest version, {}",
                shown_url(&server),
                quoted(&object.id)
            );
        }
        check_object(&object, uri, version).map_err(|why| call::bad_answer(&ask, why))?;
        Ok(object)
    }

    /// Whether the record `answered` is, by the Indexd on the DRS server's
    /// root (`GET {root}/index/{did}`, where Gen3 serves it), a version of
    /// the object `uri` names: its `baseid` is the id asked, as Indexd's
    /// single lookup matches a baseid. Any failure is a no: the answer is
    /// then refused as about another object.
    async fn is_version_of(&self, uri: &DrsUri, server: &url::Url, answered: &str) -> bool {
        #[derive(serde::Deserialize)]
        struct Record {
            did: String,
            #[serde(default)]
            baseid: Option<String>,
        }
        let mut root = server.clone();
        let path = root.path().trim_end_matches('/').to_string();
        root.set_path(path.strip_suffix(API_PATH).unwrap_or(&path));
        let mut segments = vec!["index"];
        segments.extend(answered.split('/'));
        let Ok(url) = below(&root, &segments) else {
            return false;
        };
        let asked = format!("Indexd record {} (a version of {uri}?)", quoted(answered));
        let ask = Ask {
            asked: &asked,
            server: &root,
            accept: &[StatusCode::NOT_FOUND],
            build: &|http| http.get(url.clone()),
        };
        let record: Record = match self.caller.send(&ask).await {
            Ok(resp) if resp.status().is_success() => match call::read_json(resp, &ask).await {
                Ok(record) => record,
                Err(_) => return false,
            },
            _ => return false,
        };
        record.did == answered
            && record
                .baseid
                .is_some_and(|base| base == uri.id() || uri.is_named_by(&base))
    }

    /// Where to fetch `object`'s bytes: the first of its [`AccessWay`]s
    /// (in [`DrsClient::access_ways`]' order) that yields a URL.
    pub async fn access_url(
        &self,
        uri: &DrsUri,
        object: &DrsObject,
    ) -> Result<AccessUrl, DrsError> {
        for way in self.access_ways(uri, object)? {
            if let Some(url) = self.way_url(uri, object, &way).await? {
                return Ok(url);
            }
        }
        Err(no_access(uri, object))
    }

    /// The ways to `object`'s bytes, in the order to try them: each access
    /// method of type `https`, `http` or `s3` gives its raw `access_url`
    /// and its `access_id` (a URL signed on request). When a bearer
    /// credential goes to the server (a commons: Fence signs, the user
    /// holds no keys for the bucket) the access ids come first, else the
    /// raw URLs; the others follow as fallbacks. [`DrsError::NoAccess`]
    /// when there is none.
    pub fn access_ways(
        &self,
        uri: &DrsUri,
        object: &DrsObject,
    ) -> Result<Vec<AccessWay>, DrsError> {
        let server = self.servers.base_url(uri)?;
        let signed_first = self.caller.auth.has_bearer_for(&server);
        Ok(order_ways(object, signed_first))
    }

    /// For messages: whether a bearer credential goes to `uri`'s server,
    /// and how to configure one when none does.
    pub fn credential_shown(&self, uri: &DrsUri) -> String {
        match self.servers.base_url(uri) {
            Ok(server) if self.caller.auth.has_bearer_for(&server) => {
                "a bearer credential is sent to it".into()
            }
            _ => format!(
                "none is sent to it: put an API key this commons issued in the file {gen3} \
                 names, or name the server in {} and set {gen3} or {}",
                crate::settings::env::DRS_SERVERS_ENV,
                crate::settings::env::DRS_TOKEN_FILE_ENV,
                gen3 = crate::settings::env::GEN3_CREDENTIALS_ENV,
            ),
        }
    }

    /// The URL `way` gives now: the raw one as listed, or the one the
    /// server's access endpoint answers for the access id (`None` on a
    /// 404 there). Nothing keeps it: a signed URL is for this read only.
    pub async fn way_url(
        &self,
        uri: &DrsUri,
        object: &DrsObject,
        way: &AccessWay,
    ) -> Result<Option<AccessUrl>, DrsError> {
        let server = self.servers.base_url(uri)?;
        let asked = format!("access URL of {uri}");
        let Some(method) = object.access_methods.get(way.method) else {
            return Ok(None);
        };
        if !way.signed {
            let Some(given) = &method.access_url else {
                return Ok(None);
            };
            return checked_access(given)
                .map(Some)
                .map_err(|why| bad(&asked, &server, why));
        }
        let Some(access_id) = method.access_id.as_deref() else {
            return Ok(None);
        };
        let url = below(&server, &["objects", &object.id, "access", access_id])
            .map_err(|why| bad(&asked, &server, format!("id {}: {why}", quoted(&object.id))))?;
        let ask = Ask {
            asked: &asked,
            server: &server,
            accept: &[StatusCode::NOT_FOUND],
            build: &|http| http.get(url.clone()),
        };
        let resp = self.caller.send(&ask).await?;
        if resp.status() == StatusCode::NOT_FOUND {
            log::debug!(
                "{asked}: {} has no URL for access id {}",
                shown_url(&server),
                quoted(access_id)
            );
            return Ok(None);
        }
        let given: AccessUrlJson = call::read_json(resp, &ask).await?;
        checked_access(&given)
            .map(Some)
            .map_err(|why| call::bad_answer(&ask, why))
    }
}

/// `servers` with the commons that issued the user's Gen3 API key, when
/// the key names one; whether the key file could be read. What was found
/// is logged: the user learns where their key will go, or why their
/// commons still needs naming.
fn with_key_commons(servers: DrsServers, auth: &DrsAuth) -> (DrsServers, bool) {
    use super::gen3::KeyCommons;
    let Some((path, found)) = auth.key_commons() else {
        return (servers, true);
    };
    let env = crate::settings::env::DRS_SERVERS_ENV;
    match found {
        KeyCommons::Root(root) => {
            log::info!(
                "the Gen3 API key in {} was issued by the commons at {}: its drs:// URIs, \
                 uploads and downloads go there with the key, unnamed in {env}",
                path.display(),
                shown_url(&root)
            );
            (servers.with_key_commons(root), true)
        }
        KeyCommons::Unnamed(why) => {
            log::warn!(
                "the Gen3 API key in {} names no commons drsd can use ({why}): its commons \
                 must be named in {env}, and the key goes only to servers named there",
                path.display()
            );
            (servers, true)
        }
        KeyCommons::Unread(why) => {
            log::warn!(
                "the Gen3 API key in {} cannot be read ({why}): the commons that issued it is \
                 not known until it can be",
                path.display()
            );
            (servers, false)
        }
    }
}

/// One way to an object's bytes: access method `method` (its index in
/// `access_methods`) by its access id (`signed`) or by its raw access URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessWay {
    pub method: usize,
    pub signed: bool,
}

impl AccessWay {
    /// The way as messages name it: the access id, or the raw URL
    /// (redacted as [`SecretUrl`] shows it); never a signed URL.
    pub fn shown(&self, object: &DrsObject) -> String {
        let method = object.access_methods.get(self.method);
        if self.signed {
            let id = method
                .and_then(|m| m.access_id.as_deref())
                .unwrap_or_default();
            format!("access id {}", quoted(id))
        } else {
            match method.and_then(|m| m.access_url.as_ref()) {
                Some(given) => format!("access URL {}", given.url),
                None => "access URL (none)".into(),
            }
        }
    }
}

/// The ways of `object`'s usable methods: all access ids then all raw
/// URLs when `signed_first`, else the other way round; methods in their
/// listed order within each.
fn order_ways(object: &DrsObject, signed_first: bool) -> Vec<AccessWay> {
    let usable: Vec<(usize, &AccessMethod)> = object
        .access_methods
        .iter()
        .enumerate()
        .filter(|(_, m)| usable(&m.r#type))
        .collect();
    let of = |signed: bool| {
        usable
            .iter()
            .filter(move |(_, m)| {
                if signed {
                    m.access_id.as_deref().is_some_and(|id| !id.is_empty())
                } else {
                    m.access_url.is_some()
                }
            })
            .map(move |(i, _)| AccessWay { method: *i, signed })
    };
    of(signed_first).chain(of(!signed_first)).collect()
}

/// No access method drsd can read `object` by: the types it offers.
pub fn no_access(uri: &DrsUri, object: &DrsObject) -> DrsError {
    let offered: Vec<String> = object
        .access_methods
        .iter()
        .map(|m| quoted(&m.r#type))
        .collect();
    DrsError::NoAccess {
        uri: uri.to_string(),
        offered: if offered.is_empty() {
            "none".into()
        } else {
            offered.join(", ")
        },
    }
}

/// A blank record: refused by name, the upload not finished.
pub(super) fn blank(uri: &DrsUri, server: &url::Url) -> DrsError {
    DrsError::Unusable {
        uri: uri.to_string(),
        server: shown_url(server),
        why: BLANK.into(),
    }
}

pub(super) fn not_found(uri: &DrsUri, server: &url::Url) -> DrsError {
    DrsError::NotFound {
        uri: uri.to_string(),
        server: shown_url(server),
    }
}

fn bad(asked: &str, server: &url::Url, why: impl std::fmt::Display) -> DrsError {
    DrsError::BadAnswer {
        asked: asked.to_string(),
        server: shown_url(server),
        why: why.to_string(),
    }
}

/// Why an answer's object, or its access URL, cannot be used: the `why`
/// of [`DrsError::BadAnswer`]. Ids and header names are shown quoted as
/// answers are (`model::quoted`); a URL only redacted, a header's value
/// never (it may be a secret).
#[derive(Debug, thiserror::Error)]
pub(super) enum Unfit {
    #[error("it describes the object {answered}, not {asked}")]
    OtherObject { answered: String, asked: String },
    #[error("its size {0} is past the largest drsd handles ({max} bytes)", max = crate::MAX_OBJECT_SIZE)]
    TooLarge(u64),
    #[error("the access URL {url} does not parse: {error}")]
    UrlUnparsed {
        url: SecretUrl,
        error: url::ParseError,
    },
    #[error("the access URL {0} is not https://, http:// or s3:// with a host")]
    UrlScheme(SecretUrl),
    #[error("an access URL header is not a `Name: value` line")]
    NotAHeaderLine,
    #[error("the access URL header name {0} is not valid")]
    HeaderName(String),
    #[error("the access URL sets the {0} header, which drsd's own requests decide")]
    ReservedHeader(HeaderName),
    #[error("the access URL header {0} has a value no header may carry")]
    HeaderValue(HeaderName),
}

/// An answer describes the object asked (or, `version`, a version of it
/// Indexd vouched for), with a size drsd can hold.
pub(super) fn check_object(object: &DrsObject, uri: &DrsUri, version: bool) -> Result<(), Unfit> {
    if !version && !uri.is_named_by(&object.id) {
        return Err(Unfit::OtherObject {
            answered: quoted(&object.id),
            asked: quoted(uri.id()),
        });
    }
    if object.size > crate::MAX_OBJECT_SIZE {
        return Err(Unfit::TooLarge(object.size));
    }
    Ok(())
}

fn usable(kind: &str) -> bool {
    ["https", "http", "s3"]
        .iter()
        .any(|k| kind.eq_ignore_ascii_case(k))
}

/// The URL (`https`, `http` or `s3`, with a host) and the headers split
/// into names and values, each a valid header and none reserved. Errors
/// name a header by its name only: its value may be a secret.
pub(super) fn checked_access(given: &AccessUrlJson) -> Result<AccessUrl, Unfit> {
    let url = url::Url::parse(given.url.expose()).map_err(|error| Unfit::UrlUnparsed {
        url: given.url.clone(),
        error,
    })?;
    if !matches!(url.scheme(), "https" | "http" | "s3") || url.host_str().is_none() {
        return Err(Unfit::UrlScheme(given.url.clone()));
    }
    let headers = given
        .headers
        .iter()
        .map(|line| header_line(line))
        .collect::<Result<Vec<_>, Unfit>>()?;
    Ok(AccessUrl {
        url: SecretUrl::new(given.url.expose()),
        headers,
    })
}

fn header_line(line: &str) -> Result<(String, String), Unfit> {
    let (name, value) = line.split_once(':').ok_or(Unfit::NotAHeaderLine)?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| Unfit::HeaderName(quoted(name)))?;
    if RESERVED_HEADERS.contains(&name.as_str()) {
        return Err(Unfit::ReservedHeader(name));
    }
    let value = value.trim();
    HeaderValue::from_str(value).map_err(|_| Unfit::HeaderValue(name.clone()))?;
    Ok((name.as_str().to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(url: &str, headers: &[&str]) -> AccessUrlJson {
        AccessUrlJson {
            url: SecretUrl::new(url),
            headers: headers.iter().map(|h| h.to_string()).collect(),
        }
    }

    #[test]
    fn an_access_url_with_headers_is_split_into_names_and_values() {
        let got = checked_access(&given(
            "https://b.s3.example/k?X-Amz-Signature=s",
            &["Authorization: Bearer t", "X-Extra:v: with colon"],
        ))
        .unwrap();
        assert_eq!(
            got.headers,
            vec![
                ("authorization".to_string(), "Bearer t".to_string()),
                ("x-extra".to_string(), "v: with colon".to_string())
            ]
        );
        assert!(checked_access(&given("s3://bucket/key", &[])).is_ok());
    }

    #[test]
    fn access_urls_that_are_not_fetchable_or_headers_that_take_over_are_refused() {
        for (url, headers, why) in [
            ("file:///etc/passwd", &[][..], "not https"),
            ("ftp://h/x", &[], "not https"),
            ("not a url", &[], "does not parse"),
            ("https://h/x", &["Range: bytes=0-1"], "range"),
            ("https://h/x", &["If-Match: \"x\""], "if-match"),
            ("https://h/x", &["Host: evil"], "host"),
            ("https://h/x", &["no colon"], "Name: value"),
            ("https://h/x", &["Bad Name: v"], "not valid"),
            (
                "https://h/x",
                &["X-Evil: a\r\nInjected: 1"],
                "value no header",
            ),
        ] {
            let err = checked_access(&given(url, headers))
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{url} {headers:?}: {err}");
        }
    }

    #[test]
    fn a_refused_header_is_named_without_its_value() {
        let err = checked_access(&given(
            "https://h/x",
            &["Authorization: Bearer s3cr3t\u{1}"],
        ))
        .unwrap_err()
        .to_string();
        assert!(
            !err.contains("s3cr3t") && err.contains("authorization"),
            "{err}"
        );
        let err = checked_access(&given("https://[bad/x?sig=s3cr3t", &[]))
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cr3t"), "{err}");
    }

    fn both(kind: &str, id: Option<&str>, raw: Option<&str>) -> AccessMethod {
        AccessMethod {
            r#type: kind.into(),
            access_url: raw.map(|u| given(u, &[])),
            access_id: id.map(String::from),
            region: None,
        }
    }

    fn with_methods(methods: Vec<AccessMethod>) -> DrsObject {
        DrsObject {
            id: "u1".into(),
            self_uri: None,
            size: 1,
            checksums: vec![],
            access_methods: methods,
            name: None,
        }
    }

    #[test]
    fn with_a_bearer_credential_access_ids_come_first_and_without_one_raw_urls() {
        let object = with_methods(vec![
            both("s3", Some("s3"), Some("s3://commons-bucket/k")),
            both("gs", Some("gs"), Some("gs://b/k")),
            both("https", None, Some("https://h/k")),
            both("https", Some("h2"), None),
        ]);
        let way = |method, signed| AccessWay { method, signed };
        assert_eq!(
            order_ways(&object, true),
            vec![way(0, true), way(3, true), way(0, false), way(2, false)]
        );
        assert_eq!(
            order_ways(&object, false),
            vec![way(0, false), way(2, false), way(0, true), way(3, true)]
        );
        assert_eq!(way(0, true).shown(&object), "access id \"s3\"");
        assert!(way(0, false).shown(&object).contains("commons-bucket"));
        assert!(order_ways(&with_methods(vec![]), true).is_empty());
    }

    #[test]
    fn an_answer_about_another_object_is_refused() {
        let uri = DrsUri::parse("drs://h/u1").unwrap();
        let mut object = DrsObject {
            id: "u2".into(),
            self_uri: None,
            size: 1,
            checksums: vec![],
            access_methods: vec![],
            name: None,
        };
        assert!(check_object(&object, &uri, false)
            .unwrap_err()
            .to_string()
            .contains("\"u2\""));
        assert!(
            check_object(&object, &uri, true).is_ok(),
            "a version vouched for"
        );
        object.id = "u1".into();
        object.size = u64::MAX;
        assert!(check_object(&object, &uri, false)
            .unwrap_err()
            .to_string()
            .contains("largest"));
    }
}
