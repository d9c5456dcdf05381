//! Where a DRS URI's server is: `DRSD_DRS_SERVERS`, a map from a compact
//! prefix (`dg.TEST`) or a host (`drs.example.org`, `host:port`) to the base
//! URL of its server, and the spec's default for a hostname-form URI whose
//! host is not in it: `https://host[:port]`.
//!
//! The spec resolves compact prefixes through identifiers.org or n2t.net;
//! drsd works where no such lookup may be made (and where a registry's
//! answer would decide which host gets the user's credentials), so a
//! prefix must be named here. The servers named here are also the only ones
//! bearer tokens go to (`auth.rs`).
//!
//! Besides the map, one server needs no naming: the commons that issued
//! the user's Gen3 API key (the key's `iss`, `gen3.rs`). A hostname-form
//! URI of its host, with no port or the port the key names, goes to it
//! with the key's scheme and port (`drs://host/...` of a commons served
//! over plain http on port 8080 reaches it); an entry of the map for the
//! same name still comes first.

use std::collections::BTreeMap;
use std::fmt;

use percent_encoding::utf8_percent_encode;

use super::uri::{BadDrsUri, DrsUri, Form, NOT_UNRESERVED};
use crate::settings::env::DRS_SERVERS_ENV;
use crate::settings::{Key, Settings};
use crate::stores::redacted;

/// Where DRS servers answer under their base URL.
pub(super) const API_PATH: &str = "/ga4gh/drs/v1";

/// A `DRSD_DRS_SERVERS` that cannot be read, naming the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{DRS_SERVERS_ENV}: entry {entry:?}: {why} (want NAME=URL[,NAME=URL...], e.g. dg.TEST=https://data.example.org)")]
pub struct BadDrsServers {
    pub entry: String,
    pub why: String,
}

/// The name -> base URL map.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct DrsServers {
    /// Keys lowercased (prefixes and host names compare without case);
    /// values are roots, without the API path.
    by_name: BTreeMap<String, url::Url>,
    /// The root of the commons that issued the user's Gen3 API key.
    key_commons: Option<url::Url>,
}

impl DrsServers {
    /// The map of the `drs_servers` setting (`DRSD_DRS_SERVERS`); empty
    /// when it is unset.
    pub fn from_settings(settings: &Settings) -> Result<DrsServers, BadDrsServers> {
        DrsServers::parse(settings.text(Key::DrsServers).unwrap_or_default())
    }

    /// `NAME=URL` entries separated by commas (blanks around them ignored).
    pub fn parse(text: &str) -> Result<DrsServers, BadDrsServers> {
        let mut by_name = BTreeMap::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |why: &str| BadDrsServers {
                entry: redacted(entry).chars().take(200).collect(),
                why: why.into(),
            };
            let (name, base) = entry.split_once('=').ok_or_else(|| bad("no `=`"))?;
            let name = check_name(name.trim()).map_err(bad)?;
            let base = check_base(base.trim()).map_err(|why| bad(&why.to_string()))?;
            if by_name.insert(name, base).is_some() {
                return Err(bad("the name is given twice"));
            }
        }
        Ok(DrsServers {
            by_name,
            key_commons: None,
        })
    }

    /// This map and the commons at `root` (`https://host[:port]`), the one
    /// that issued the user's Gen3 API key.
    pub(super) fn with_key_commons(mut self, root: url::Url) -> DrsServers {
        self.key_commons = Some(root);
        self
    }

    /// The root of the commons that issued the user's Gen3 API key.
    pub fn key_commons(&self) -> Option<&url::Url> {
        self.key_commons.as_ref()
    }

    /// The DRS API root for `uri`: the mapped base (or `https://host[:port]`
    /// for an unmapped hostname-form host) with `/ga4gh/drs/v1`.
    pub fn base_url(&self, uri: &DrsUri) -> Result<url::Url, BadDrsUri> {
        let root = match uri.form() {
            Form::Hostname { host, port } => self.host_root(host, *port, uri)?,
            Form::Compact { prefix, .. } => self.prefix_root(prefix, uri)?,
        };
        Ok(api_root(root))
    }

    /// `base/objects/{id}`, the id percent-encoded as one path segment.
    pub fn object_url(&self, uri: &DrsUri) -> Result<url::Url, BadDrsUri> {
        let base = self.base_url(uri)?;
        below(&base, &["objects", uri.id()])
            .map_err(|why| BadDrsUri::new(uri.as_str(), why.to_string()))
    }

    /// The base URLs of the map and the commons that issued the user's
    /// key: the servers the user named.
    pub(super) fn bases(&self) -> impl Iterator<Item = &url::Url> {
        self.by_name.values().chain(&self.key_commons)
    }

    /// Whether the server at `url` (scheme, host and port) is one the user
    /// named (in the map, or by holding a key it issued): what a repo says
    /// (its Indexd, its commons) is trusted only then.
    pub fn names(&self, url: &url::Url) -> bool {
        self.bases().any(|base| base.origin() == url.origin())
    }

    fn host_root(
        &self,
        host: &str,
        port: Option<u16>,
        uri: &DrsUri,
    ) -> Result<url::Url, BadDrsUri> {
        let authority = match port {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        if let Some(base) = self.by_name.get(&authority) {
            return Ok(base.clone());
        }
        if let Some(root) = self.key_commons_at(host, port) {
            return Ok(root.clone());
        }
        url::Url::parse(&format!("https://{authority}"))
            .map_err(|e| BadDrsUri::new(uri.as_str(), format!("host {authority}: {e}")))
    }

    /// The key's commons, when `host[:port]` is its host and, if a port is
    /// given, its port (said or its scheme's default).
    fn key_commons_at(&self, host: &str, port: Option<u16>) -> Option<&url::Url> {
        let root = self.key_commons.as_ref()?;
        let same_host = root
            .host_str()
            .is_some_and(|h| h.eq_ignore_ascii_case(host));
        let same_port = port.is_none_or(|p| Some(p) == root.port_or_known_default());
        (same_host && same_port).then_some(root)
    }

    fn prefix_root(&self, prefix: &str, uri: &DrsUri) -> Result<url::Url, BadDrsUri> {
        self.by_name
            .get(&prefix.to_ascii_lowercase())
            .cloned()
            .ok_or_else(|| {
                BadDrsUri::new(
                    uri.as_str(),
                    format!(
                        "the prefix {prefix:?} names no server: add {prefix}=https://HOST to \
                         {DRS_SERVERS_ENV}"
                    ),
                )
            })
    }
}

impl fmt::Debug for DrsServers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        map.entries(self.by_name.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if let Some(root) = &self.key_commons {
            map.entry(&"(the Gen3 key's commons)", &root.as_str());
        }
        map.finish()
    }
}

/// `root` with the API path, unless it already ends with it.
fn api_root(mut root: url::Url) -> url::Url {
    let path = root.path().trim_end_matches('/');
    let api = if path.ends_with(API_PATH) {
        ""
    } else {
        API_PATH
    };
    root.set_path(&format!("{path}{api}"));
    root
}

/// Why an id cannot be asked for at a server: its URL would not address
/// exactly the object named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Unaddressable {
    #[error("the path segment {0:?} cannot be addressed exactly")]
    Segment(String),
    #[error("the id does not stay one path segment")]
    NotOneSegment,
}

/// Why a `DRSD_DRS_SERVERS` entry's URL cannot be a server's root.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum BadBase {
    #[error("not a URL: {0}")]
    NotAUrl(url::ParseError),
    #[error("the URL must be http:// or https:// with a host")]
    NotHttp,
    #[error("the URL holds user-info: put logins in ~/.netrc instead")]
    UserInfo,
    #[error("the URL must have no query or fragment")]
    QueryOrFragment,
}

/// `base` with `segments` appended, each percent-encoded as one segment
/// (every byte outside the unreserved set), and checked to have stayed
/// where it was put: a request must reach exactly the object named.
pub(super) fn below(base: &url::Url, segments: &[&str]) -> Result<url::Url, Unaddressable> {
    let mut url = base.clone();
    let mut path = base.path().trim_end_matches('/').to_string();
    let mut encoded = Vec::with_capacity(segments.len());
    for segment in segments {
        if segment.is_empty() || *segment == "." || *segment == ".." {
            return Err(Unaddressable::Segment(segment.to_string()));
        }
        let one = utf8_percent_encode(segment, NOT_UNRESERVED).to_string();
        path.push('/');
        path.push_str(&one);
        encoded.push(one);
    }
    url.set_path(&path);
    let tail: Vec<&str> = url
        .path_segments()
        .map(|s| s.rev().take(encoded.len()).collect())
        .unwrap_or_default();
    let stayed = tail
        .iter()
        .rev()
        .copied()
        .eq(encoded.iter().map(String::as_str));
    stayed.then_some(url).ok_or(Unaddressable::NotOneSegment)
}

/// A prefix or a `host[:port]`: letters, digits, `.`, `_`, `-` and `:`,
/// lowercased.
fn check_name(name: &str) -> Result<String, &'static str> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':'));
    ok.then(|| name.to_ascii_lowercase())
        .ok_or("the name must be a prefix (dg.TEST) or a host[:port]")
}

/// An `http(s)://` root with no user-info, query or fragment: credentials
/// belong in ~/.netrc or a token file, never in a variable that shows in
/// `ps e` and logs.
fn check_base(text: &str) -> Result<url::Url, BadBase> {
    let url = url::Url::parse(text).map_err(BadBase::NotAUrl)?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(BadBase::NotHttp);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(BadBase::UserInfo);
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(BadBase::QueryOrFragment);
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers() -> DrsServers {
        DrsServers::parse(
            " dg.TEST=https://data.example.org , drs.example.org=http://127.0.0.1:8098,\
             h:9000=https://other.example/root/",
        )
        .unwrap()
    }

    fn base(text: &str) -> Result<String, BadDrsUri> {
        servers()
            .base_url(&DrsUri::parse(text).unwrap())
            .map(String::from)
    }

    #[test]
    fn a_mapped_prefix_or_host_uses_its_base_and_the_api_path() {
        assert_eq!(
            base("drs://dg.test:u1").unwrap(),
            "https://data.example.org/ga4gh/drs/v1"
        );
        assert_eq!(
            base("drs://DRS.example.org/x").unwrap(),
            "http://127.0.0.1:8098/ga4gh/drs/v1"
        );
        assert_eq!(
            base("drs://h:9000/x").unwrap(),
            "https://other.example/root/ga4gh/drs/v1"
        );
    }

    #[test]
    fn an_unmapped_host_is_asked_over_https_on_its_own_port() {
        assert_eq!(
            base("drs://elsewhere.org/x").unwrap(),
            "https://elsewhere.org/ga4gh/drs/v1"
        );
        assert_eq!(
            base("drs://h/x").unwrap(),
            "https://h/ga4gh/drs/v1",
            "h:9000 is mapped, h alone is not"
        );
        assert_eq!(
            base("drs://elsewhere.org:8443/x").unwrap(),
            "https://elsewhere.org:8443/ga4gh/drs/v1"
        );
    }

    #[test]
    fn an_unmapped_prefix_is_an_error_naming_it_and_the_variable() {
        let err = base("drs://dg.NOPE:u1").unwrap_err().to_string();
        assert!(
            err.contains("dg.NOPE") && err.contains(DRS_SERVERS_ENV),
            "{err}"
        );
    }

    #[test]
    fn a_base_already_ending_in_the_api_path_keeps_it_once() {
        let map = DrsServers::parse("p=https://h/ga4gh/drs/v1/").unwrap();
        let uri = DrsUri::parse("drs://p:x").unwrap();
        assert_eq!(
            map.base_url(&uri).unwrap().as_str(),
            "https://h/ga4gh/drs/v1"
        );
    }

    #[test]
    fn the_object_url_holds_the_id_as_one_encoded_segment() {
        let map = servers();
        for (text, want) in [
            (
                "drs://dg.TEST:u1",
                "https://data.example.org/ga4gh/drs/v1/objects/dg.TEST%2Fu1",
            ),
            (
                "drs://drs.example.org/a%3Fb%23c%25d",
                "http://127.0.0.1:8098/ga4gh/drs/v1/objects/a%3Fb%23c%25d",
            ),
            (
                "drs://drs.example.org/..%2F..%2Fadmin",
                "http://127.0.0.1:8098/ga4gh/drs/v1/objects/..%2F..%2Fadmin",
            ),
        ] {
            let url = map.object_url(&DrsUri::parse(text).unwrap()).unwrap();
            assert_eq!(url.as_str(), want, "{text}");
            assert_eq!(url.query(), None, "{text}");
            assert_eq!(url.fragment(), None, "{text}");
        }
    }

    #[test]
    fn every_id_round_trips_through_its_object_url() {
        let map = DrsServers::parse("h=http://127.0.0.1:1").unwrap();
        for id in [
            "a/b",
            "?x",
            "#y",
            "%41",
            "..a",
            "a..",
            ".x",
            "~",
            "ü",
            "a:b;c=d@e",
        ] {
            let text = format!("drs://h/{}", utf8_percent_encode(id, NOT_UNRESERVED));
            let uri = DrsUri::parse(&text).unwrap();
            let url = map.object_url(&uri).unwrap();
            let last = url.path_segments().unwrap().next_back().unwrap();
            let back = percent_encoding::percent_decode_str(last)
                .decode_utf8()
                .unwrap();
            assert_eq!(back, id, "{url}");
        }
    }

    fn with_key_commons(map: &str, root: &str) -> DrsServers {
        DrsServers::parse(map)
            .unwrap()
            .with_key_commons(url::Url::parse(root).unwrap())
    }

    #[test]
    fn the_key_commons_host_resolves_with_the_keys_scheme_and_port() {
        let map = with_key_commons("", "http://commons.example:8080");
        let base = |text: &str| {
            map.base_url(&DrsUri::parse(text).unwrap())
                .unwrap()
                .to_string()
        };
        for uri in [
            "drs://commons.example/x",
            "drs://COMMONS.example/x",
            "drs://commons.example:8080/x",
        ] {
            assert_eq!(
                base(uri),
                "http://commons.example:8080/ga4gh/drs/v1",
                "{uri}"
            );
        }
        assert_eq!(
            base("drs://commons.example:9090/x"),
            "https://commons.example:9090/ga4gh/drs/v1",
            "another port is another server"
        );
        assert_eq!(
            base("drs://other.example/x"),
            "https://other.example/ga4gh/drs/v1"
        );
        let https = with_key_commons("", "https://commons.example/");
        let uri = DrsUri::parse("drs://commons.example:443/x").unwrap();
        assert_eq!(
            https.base_url(&uri).unwrap().as_str(),
            "https://commons.example/ga4gh/drs/v1",
            "the scheme's default port is the key's port"
        );
    }

    #[test]
    fn the_key_commons_is_a_named_server_and_an_entry_for_its_host_comes_first() {
        let map = with_key_commons(
            "commons.example=https://mirror.example",
            "http://commons.example:8080",
        );
        let uri = DrsUri::parse("drs://commons.example/x").unwrap();
        assert_eq!(
            map.base_url(&uri).unwrap().as_str(),
            "https://mirror.example/ga4gh/drs/v1"
        );
        let url = |s: &str| url::Url::parse(s).unwrap();
        assert!(map.names(&url("http://commons.example:8080/index")));
        assert!(
            !map.names(&url("https://commons.example/")),
            "another origin"
        );
        assert!(!DrsServers::default().names(&url("http://commons.example:8080/")));
        assert!(format!("{map:?}").contains("http://commons.example:8080/"));
    }

    #[test]
    fn bad_entries_are_refused_by_name() {
        for (text, why) in [
            ("dg.TEST", "no `=`"),
            ("=https://h", "prefix"),
            ("a b=https://h", "prefix"),
            ("p=ftp://h", "http"),
            ("p=https://u:pw@h", "user-info"),
            ("p=https://h/?token=x", "query"),
            ("p=not a url", "not a URL"),
            ("p=https://a,P=https://b", "twice"),
        ] {
            let err = DrsServers::parse(text).unwrap_err();
            assert!(err.to_string().contains(why), "{text}: {err}");
        }
        let err = DrsServers::parse("p=https://u:s3cr3t@h").unwrap_err();
        assert!(!err.to_string().contains("s3cr3t"), "{err}");
    }
}
