//! DRS URIs (`drs://`), the two forms the GA4GH DRS spec defines, parsed
//! once into the object id sent to a server and one canonical text that the
//! registry stores and compares.
//!
//! - Hostname form, `drs://host[:port]/id`: the id is everything after the
//!   first `/` after the host, percent-decoded once. The canonical text
//!   encodes it again, every byte outside RFC 3986's unreserved set
//!   (`A-Z a-z 0-9 - . _ ~`) as `%XX`, so `drs://h/a/b` and `drs://h/a%2Fb`
//!   are one object, `drs://h/a%2Fb`, and a canonical text parses back to
//!   itself. The spec has no port; a `:` followed by digits and a `/` is
//!   read as one here (a loopback test server), so an accession of only
//!   digits followed by `/` cannot be written in the compact form.
//! - Compact form, `drs://[provider/]prefix:accession`, split at the first
//!   `:`. The spec resolves the prefix through identifiers.org; drsd works
//!   offline, so the prefix is looked up in `DRSD_DRS_SERVERS` instead
//!   (`servers.rs`). The id sent is `prefix/accession`: Gen3 Indexd, the
//!   server that hands out compact URIs (its `self_uri` is
//!   `drs://dg.TEST:<uuid>`), names that object `dg.TEST/<uuid>`, which is
//!   exactly its did. The bare accession is accepted back as the same
//!   object's id ([`DrsUri::is_named_by`]).
//!
//! Ids may be hostile. Control characters and blanks are refused anywhere
//! (before and after decoding). An id of `.` or `..` is refused: no request
//! URL can address it (URL parsers resolve such a segment, encoded or not).
//! Everything else (`/`, `?`, `#`, `%`, `..` inside a longer id) is carried
//! as data and sent as one percent-encoded path segment (`object_url`).

use std::fmt;

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Every byte but RFC 3986's unreserved ones: what an id sent as one path
/// segment, or written in a canonical URI, must have encoded.
pub(super) const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The longest URI text accepted: an id is a name, not a payload.
const MAX_LEN: usize = 2048;

/// A text that is not a DRS URI drsd can resolve, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a DRS URI drsd can use: {uri}: {why}")]
pub struct BadDrsUri {
    /// The text as given, shortened and with control characters escaped.
    pub uri: String,
    pub why: String,
}

impl BadDrsUri {
    pub(super) fn new(text: &str, why: impl Into<String>) -> BadDrsUri {
        let shown: String = text.chars().take(200).collect();
        BadDrsUri {
            uri: format!("{shown:?}"),
            why: why.into(),
        }
    }
}

/// Why a text is not a DRS URI: the `why` of [`BadDrsUri`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum UriFault {
    #[error("it holds {0:?}: control characters and blanks are refused")]
    Unprintable(char),
    #[error("no `/id` after the host")]
    NoId,
    #[error("port {0:?} is not 1 to 65535")]
    Port(String),
    #[error("host {0:?} is not a DNS name (letters, digits, `.` and `-`)")]
    Host(String),
    #[error("the {0} is not UTF-8 once percent-decoded")]
    NotUtf8(&'static str),
    #[error("the {0} is empty")]
    Empty(&'static str),
    #[error("the {what} {id:?} cannot be addressed exactly: a request URL resolves it away")]
    DotSegment { what: &'static str, id: String },
    /// The id (or accession) decoded holds what [`UriFault::Unprintable`] refuses.
    #[error("the decoded id: {0}")]
    DecodedUnprintable(Box<UriFault>),
    #[error("{what} {name:?} is not letters, digits, `.`, `_` and `-`")]
    Name { what: &'static str, name: String },
}

/// A parsed `drs://` URI: where the object lives and its id there.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct DrsUri {
    /// The canonical text (see the module notes).
    text: String,
    /// The id sent to the server.
    id: String,
    form: Form,
}

/// Which of the spec's two forms a URI is written in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Form {
    Hostname {
        /// Lowercase: DNS names are not case-sensitive.
        host: String,
        port: Option<u16>,
    },
    Compact {
        provider: Option<String>,
        prefix: String,
        accession: String,
    },
}

impl DrsUri {
    /// Parses either form (see the module notes for the rules).
    pub fn parse(text: &str) -> Result<DrsUri, BadDrsUri> {
        let bad = |why: &str| BadDrsUri::new(text, why);
        if text.len() > MAX_LEN {
            return Err(bad("longer than 2048 bytes"));
        }
        check_printable(text).map_err(|why| bad(&why.to_string()))?;
        let rest = strip_scheme(text).ok_or_else(|| bad("it does not start with drs://"))?;
        match rest.find(':') {
            Some(colon) if !has_port(rest) => compact(&rest[..colon], &rest[colon + 1..]),
            _ => hostname(rest),
        }
        .map_err(|why| bad(&why.to_string()))
    }

    /// The object id sent to the server (hostname form: the id decoded;
    /// compact form: `prefix/accession`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The canonical text, what the registry stores.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub(super) fn form(&self) -> &Form {
        &self.form
    }

    /// Whether an answer naming the object `answered` names this one, as
    /// Gen3 Indexd's single lookup matches a did with or without its
    /// prefix: its id exactly; for the compact form also the bare
    /// accession (a record whose did has no prefix: Indexd's `self_uri`
    /// for it is `drs://dg.XXXX:<uuid>` all the same); for a hostname-form
    /// id, also `P/id` (Indexd answers a bare uuid with its full did,
    /// `dg.TEST/<uuid>`) and, for an id `P/rest`, the bare `rest`. (A
    /// `baseid` answered with a newer version's did is checked with
    /// Indexd itself, `DrsClient::object`.)
    pub fn is_named_by(&self, answered: &str) -> bool {
        if answered == self.id {
            return true;
        }
        match &self.form {
            Form::Compact { accession, .. } => answered == accession,
            Form::Hostname { .. } => {
                let prefixed = answered
                    .split_once('/')
                    .is_some_and(|(prefix, rest)| rest == self.id && !prefix.is_empty());
                let bare = self
                    .id
                    .split_once('/')
                    .is_some_and(|(prefix, rest)| rest == answered && !prefix.is_empty());
                prefixed || bare
            }
        }
    }
}

impl fmt::Display for DrsUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for DrsUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DrsUri({:?})", self.text)
    }
}

/// `drs://` in any case (URI schemes are not case-sensitive).
fn strip_scheme(text: &str) -> Option<&str> {
    let (scheme, rest) = text.split_once("://")?;
    scheme.eq_ignore_ascii_case("drs").then_some(rest)
}

/// No control characters and no blanks: an id is printed in logs, reports
/// and `.gitattributes`-adjacent files, where they could forge lines.
fn check_printable(text: &str) -> Result<(), UriFault> {
    match text.chars().find(|c| c.is_control() || c.is_whitespace()) {
        Some(c) => Err(UriFault::Unprintable(c)),
        None => Ok(()),
    }
}

/// `host:port/...`: the authority before the first `/` ends in `:` and a
/// decimal port.
fn has_port(rest: &str) -> bool {
    let Some((authority, _)) = rest.split_once('/') else {
        return false;
    };
    authority.split_once(':').is_some_and(|(host, port)| {
        !host.is_empty()
            && !port.is_empty()
            && port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
    })
}

fn hostname(rest: &str) -> Result<DrsUri, UriFault> {
    let (authority, raw_id) = rest.split_once('/').ok_or(UriFault::NoId)?;
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(parse_port(port)?)),
        None => (authority, None),
    };
    let host = check_host(host)?;
    let id = decode_id(raw_id)?;
    let port_text = port.map(|p| format!(":{p}")).unwrap_or_default();
    let encoded = utf8_percent_encode(&id, NOT_UNRESERVED);
    Ok(DrsUri {
        text: format!("drs://{host}{port_text}/{encoded}"),
        id,
        form: Form::Hostname { host, port },
    })
}

fn parse_port(port: &str) -> Result<u16, UriFault> {
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(UriFault::Port(port.to_string())),
    }
}

/// A DNS name or an IPv4 address: letters, digits, `.` and `-`, lowercased.
fn check_host(host: &str) -> Result<String, UriFault> {
    let ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        && !host.starts_with(['.', '-'])
        && !host.contains("..");
    if !ok {
        return Err(UriFault::Host(host.to_string()));
    }
    Ok(host.to_ascii_lowercase())
}

/// The id percent-decoded once, and checked again after decoding.
fn decode_id(raw: &str) -> Result<String, UriFault> {
    let id = percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| UriFault::NotUtf8("id"))?
        .into_owned();
    check_id("id", &id)?;
    Ok(id)
}

/// `what` is the name the error gives the text: `id` or `accession`.
fn check_id(what: &'static str, id: &str) -> Result<(), UriFault> {
    if id.is_empty() {
        return Err(UriFault::Empty(what));
    }
    if id == "." || id == ".." {
        return Err(UriFault::DotSegment {
            what,
            id: id.to_string(),
        });
    }
    check_printable(id).map_err(|why| UriFault::DecodedUnprintable(Box::new(why)))
}

/// `[provider/]prefix` and the accession after the first `:`.
fn compact(head: &str, accession: &str) -> Result<DrsUri, UriFault> {
    let (provider, prefix) = match head.split_once('/') {
        Some((provider, prefix)) => (Some(check_name("provider code", provider)?), prefix),
        None => (None, head),
    };
    let prefix = check_name("prefix", prefix)?;
    check_id("accession", accession)?;
    let id = format!("{prefix}/{accession}");
    let provider_text = provider
        .as_ref()
        .map(|p| format!("{p}/"))
        .unwrap_or_default();
    Ok(DrsUri {
        text: format!("drs://{provider_text}{prefix}:{accession}"),
        id,
        form: Form::Compact {
            provider,
            prefix,
            accession: accession.to_string(),
        },
    })
}

/// A namespace prefix or provider code: letters, digits, `.`, `_` and `-`
/// (identifiers.org's rule; no `/` or `:`, which split the URI).
fn check_name(what: &'static str, name: &str) -> Result<String, UriFault> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !ok {
        return Err(UriFault::Name {
            what,
            name: name.to_string(),
        });
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(text: &str) -> String {
        DrsUri::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .id()
            .to_string()
    }

    #[test]
    fn the_hostname_form_keeps_everything_after_the_first_slash_as_the_id() {
        let uri = DrsUri::parse("drs://Data.Example.org/abc-123").unwrap();
        assert_eq!(uri.id(), "abc-123");
        assert_eq!(uri.as_str(), "drs://data.example.org/abc-123");
        assert_eq!(
            uri.form(),
            &Form::Hostname {
                host: "data.example.org".into(),
                port: None
            }
        );
        assert_eq!(id_of("drs://h/dg.TEST/0a1b"), "dg.TEST/0a1b");
    }

    #[test]
    fn the_hostname_form_decodes_the_id_once_and_its_canonical_text_encodes_it() {
        let uri = DrsUri::parse("drs://h/a%2Fb%2520c").unwrap();
        assert_eq!(uri.id(), "a/b%20c");
        assert_eq!(uri.as_str(), "drs://h/a%2Fb%2520c");
        let plain = DrsUri::parse("drs://h/a/b%2520c").unwrap();
        assert_eq!(plain, uri, "an unencoded `/` is the same id");
    }

    #[test]
    fn a_canonical_text_parses_back_to_the_same_uri() {
        for text in [
            "drs://h/x",
            "drs://h:8098/a/b?c#d",
            "drs://h/%C3%BC%3F%23",
            "drs://h/..x",
            "drs://h/a/../b",
            "drs://h/%252e%252e",
            "drs://dg.TEST:0a1b-2c",
            "drs://prov/doi:10.5072/FK2805660V",
            "DRS://H/x~y",
        ] {
            let once = DrsUri::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let twice = DrsUri::parse(once.as_str()).unwrap();
            assert_eq!(once, twice, "{text}");
            assert_eq!(once.as_str(), twice.as_str(), "{text}");
        }
    }

    #[test]
    fn a_port_of_digits_before_a_slash_makes_the_hostname_form() {
        let uri = DrsUri::parse("drs://127.0.0.1:8098/obj").unwrap();
        assert_eq!(
            uri.form(),
            &Form::Hostname {
                host: "127.0.0.1".into(),
                port: Some(8098)
            }
        );
        assert_eq!(uri.as_str(), "drs://127.0.0.1:8098/obj");
        assert!(DrsUri::parse("drs://h:0/x").is_err());
        assert!(DrsUri::parse("drs://h:70000/x").is_err());
    }

    #[test]
    fn the_compact_form_splits_at_the_first_colon_and_sends_prefix_slash_accession() {
        let uri = DrsUri::parse("drs://dg.TEST:0a1b-2c").unwrap();
        assert_eq!(uri.id(), "dg.TEST/0a1b-2c");
        assert_eq!(uri.as_str(), "drs://dg.TEST:0a1b-2c");
        let doi = DrsUri::parse("drs://doi:10.5072/FK2805660V").unwrap();
        assert_eq!(doi.id(), "doi/10.5072/FK2805660V");
        let provided = DrsUri::parse("drs://ebi/dg.X:a:b").unwrap();
        assert_eq!(
            provided.form(),
            &Form::Compact {
                provider: Some("ebi".into()),
                prefix: "dg.X".into(),
                accession: "a:b".into()
            }
        );
        assert_eq!(provided.id(), "dg.X/a:b");
    }

    #[test]
    fn an_answer_may_name_the_object_by_its_id_its_accession_or_a_gen3_did() {
        let compact = DrsUri::parse("drs://dg.TEST:u1").unwrap();
        assert!(compact.is_named_by("dg.TEST/u1"));
        assert!(compact.is_named_by("u1"));
        assert!(!compact.is_named_by("dg.OTHER/u1x"));
        let host = DrsUri::parse("drs://h/u1").unwrap();
        assert!(host.is_named_by("u1"));
        assert!(host.is_named_by("dg.TEST/u1"));
        assert!(!host.is_named_by("/u1"));
        assert!(!host.is_named_by("u2"));
        assert!(!host.is_named_by("a/b/u1x"));
        let prefixed = DrsUri::parse("drs://h/dg.TEST/u1").unwrap();
        assert!(
            prefixed.is_named_by("u1"),
            "a record whose did has no prefix"
        );
        assert!(prefixed.is_named_by("dg.TEST/u1"));
        assert!(!prefixed.is_named_by("u2"));
        assert!(!prefixed.is_named_by("TEST/u1"));
    }

    #[test]
    fn hostile_ids_are_refused_by_name() {
        for (text, why) in [
            ("drs://h/", "empty"),
            ("drs://h/.", "cannot be addressed"),
            ("drs://h/..", "cannot be addressed"),
            ("drs://h/%2e%2E", "cannot be addressed"),
            ("drs://h/a b", "blanks"),
            ("drs://h/a%20b", "blanks"),
            ("drs://h/a%0Ab", "control"),
            ("drs://h/a%00", "control"),
            ("drs://h/a\u{7f}", "control"),
            ("drs://h/%FF", "UTF-8"),
            ("drs://h", "no `/id`"),
            ("drs://h_x/id", "DNS name"),
            ("drs://user@h/id", "DNS name"),
            ("drs://dg.TEST:", "accession is empty"),
            ("drs://:x", "prefix"),
            ("drs://a/b/c:x", "prefix"),
            ("drs://dg.TEST:..", "cannot be addressed"),
            ("https://h/x", "drs://"),
            ("drs:/h/x", "drs://"),
        ] {
            let err = DrsUri::parse(text).unwrap_err();
            assert!(err.to_string().contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn a_refused_uri_is_shown_escaped_and_shortened() {
        let long = format!("drs://h/{}\n", "x".repeat(5000));
        let err = DrsUri::parse(&long).unwrap_err().to_string();
        assert!(err.len() < 400, "{}", err.len());
        let err = DrsUri::parse("drs://h/a\nforged line")
            .unwrap_err()
            .to_string();
        assert!(!err.contains('\n'), "{err}");
    }
}
