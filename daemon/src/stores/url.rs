//! Object URLs: parsing (`s3://bucket/key`, `https://...`), the layout of
//! an object remote's keys ([`ObjectLayout`]), and keeping the
//! secrets some carry out of every log line, error message and report.
//!
//! A URL may carry credentials: user-info (`https://user:pass@host/`) or a
//! signature in its query (presigned S3, CloudFront, GCS, Azure SAS, OAuth
//! tokens). [`redacted`] keeps what tells an object apart (scheme, host,
//! port, path, ordinary parameters) and replaces the secrets with
//! `REDACTED`; [`redact_text`] does it to every URL inside a message.
//! [`SecretUrl`] holds a URL whole (a later request needs it) and formats
//! only redacted, so it cannot be printed raw by accident.

use std::fmt;

use super::RemoteError;
use crate::pool::Oid;

/// What a secret is replaced with.
pub const REDACTED: &str = "REDACTED";

/// Query and fragment parameters that are secrets, by exact name (compared
/// without case): S3 SigV2 (`AWSAccessKeyId`, `Signature`, `Expires`),
/// CloudFront (`Policy`, `Signature`, `Key-Pair-Id`, `Expires`), GCS V2
/// (`GoogleAccessId`), Azure SAS (`sig`), API keys.
const SECRET_NAMES: [&str; 12] = [
    "sig",
    "signature",
    "expires",
    "policy",
    "key-pair-id",
    "googleaccessid",
    "awsaccesskeyid",
    "key",
    "apikey",
    "api_key",
    "api-key",
    "auth",
];

/// Parts of parameter names that make them secrets wherever they appear:
/// `X-Amz-Signature`, `X-Amz-Credential`, `X-Amz-Security-Token`,
/// `X-Goog-Signature`, `X-Goog-Credential`, `token`, `access_token`,
/// `client_secret`, `password`.
const SECRET_WORDS: [&str; 6] = [
    "signature",
    "credential",
    "token",
    "secret",
    "password",
    "passwd",
];

fn is_secret(name: &str) -> bool {
    let name = name.trim().to_ascii_lowercase();
    SECRET_NAMES.contains(&name.as_str()) || SECRET_WORDS.iter().any(|w| name.contains(w))
}

/// `url` as logs, errors and reports may show it: user-info and secret
/// parameters (in the query or the fragment) replaced by `REDACTED`; the
/// rest as given. Works on any text (a URL that does not parse included),
/// so it never fails and never shows more than it was given.
pub fn redacted(url: &str) -> String {
    let (before_fragment, fragment) = match url.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (url, None),
    };
    let (before_query, query) = match before_fragment.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (before_fragment, None),
    };
    let mut out = without_user_info(before_query);
    if let Some(q) = query {
        out.push('?');
        out.push_str(&redact_params(q));
    }
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(&redact_params(f));
    }
    out
}

/// `scheme://user:pass@host/path` -> `scheme://REDACTED@host/path`.
fn without_user_info(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_string();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    match authority.rfind('@') {
        Some(at) => format!("{scheme}://{REDACTED}@{}{path}", &authority[at + 1..]),
        None => text.to_string(),
    }
}

/// `a=1&X-Amz-Signature=abc` -> `a=1&X-Amz-Signature=REDACTED`.
fn redact_params(params: &str) -> String {
    let redact = |param: &str| -> String {
        let name = param.split('=').next().unwrap_or_default();
        let name = url::form_urlencoded::parse(name.as_bytes())
            .next()
            .map(|(k, _)| k.into_owned())
            .unwrap_or_default();
        if is_secret(&name) {
            let raw_name = param.split('=').next().unwrap_or_default();
            format!("{raw_name}={REDACTED}")
        } else {
            param.to_string()
        }
    };
    params.split('&').map(redact).collect::<Vec<_>>().join("&")
}

/// `text` with every URL in it (anything from `scheme://` to the next
/// blank, quote, bracket or parenthesis) [`redacted`]: for messages of other
/// origins (reqwest, git) that may quote a URL whole.
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "+.-".contains(c)))
            .map_or(0, |i| i + 1);
        let len = rest[at..]
            .find(|c: char| c.is_whitespace() || "\"'<>`()".contains(c))
            .unwrap_or(rest.len() - at);
        out.push_str(&rest[..start]);
        out.push_str(&redacted(&rest[start..at + len]));
        rest = &rest[at + len..];
    }
    out.push_str(rest);
    out
}

/// A URL kept whole, for the requests that need it, that formats
/// (`Display` and `Debug`) only [`redacted`]. The raw text comes out only
/// through [`SecretUrl::expose`], to send a request or to store it in the
/// private registry.
#[derive(Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct SecretUrl(String);

/// `url` without its query and fragment: what names the object, without
/// what a signed URL's signature changes from one day to the next.
pub fn without_query(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or(url)
}

impl SecretUrl {
    pub fn new(url: impl Into<String>) -> SecretUrl {
        SecretUrl(url.into())
    }

    /// The URL without its query and fragment ([`without_query`]); it may
    /// still hold user-info: not for display.
    pub fn without_query(&self) -> &str {
        without_query(&self.0)
    }

    /// The URL whole, secrets included: only for a request or private storage.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for SecretUrl {
    fn from(url: &str) -> SecretUrl {
        SecretUrl::new(url)
    }
}

impl From<String> for SecretUrl {
    fn from(url: String) -> SecretUrl {
        SecretUrl(url)
    }
}

impl PartialEq<&str> for SecretUrl {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redacted(&self.0))
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretUrl({:?})", redacted(&self.0))
    }
}

impl rusqlite::ToSql for SecretUrl {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        self.0.to_sql()
    }
}

impl rusqlite::types::FromSql for SecretUrl {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        String::column_result(value).map(SecretUrl)
    }
}

/// Where a remote object lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ObjectUrl {
    S3 {
        bucket: String,
        key: String,
    },
    Https(url::Url),
    /// A GA4GH DRS object: resolved to an access URL (one of the above) each
    /// time it is read, since access URLs may be signed and expire.
    Drs(super::drs::DrsUri),
}

impl ObjectUrl {
    pub fn parse(text: &str) -> Result<ObjectUrl, RemoteError> {
        let bad = |why: &str| RemoteError::BadUrl {
            url: redacted(text).chars().take(200).collect(),
            why: why.into(),
        };
        if text.starts_with("drs://") {
            return super::drs::DrsUri::parse(text)
                .map(ObjectUrl::Drs)
                .map_err(|e| bad(&e.to_string()));
        }
        if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, key) = rest
                .split_once('/')
                .ok_or_else(|| bad("no key after the bucket"))?;
            if bucket.is_empty() || key.is_empty() {
                return Err(bad("empty bucket or key"));
            }
            check_bucket(bucket).map_err(bad)?;
            check_key(key).map_err(bad)?;
            return Ok(ObjectUrl::S3 {
                bucket: bucket.into(),
                key: key.into(),
            });
        }
        let url = url::Url::parse(text).map_err(|e| bad(&e.to_string()))?;
        match url.scheme() {
            "https" | "http" if url.host_str().is_some() => Ok(ObjectUrl::Https(url)),
            _ => Err(bad(
                "want s3://bucket/key, https://host/path, drs://host/id or drs://prefix:accession",
            )),
        }
    }

    /// The last path segment: the default file name for the object. A DRS
    /// id names no file (its object's `name` is known only once it is read).
    pub fn file_name(&self) -> Option<&str> {
        let path = match self {
            ObjectUrl::S3 { key, .. } => key.as_str(),
            ObjectUrl::Https(url) => url.path(),
            ObjectUrl::Drs(_) => return None,
        };
        path.rsplit('/').next().filter(|s| !s.is_empty())
    }
}

/// S3's bucket naming rules: 3 to 63 of `a-z 0-9 . -`, a letter or digit at
/// each end, no `..`. Anything else could change the request's host or path
/// (the name is a host label or a path segment), or address another bucket.
pub(super) fn check_bucket(bucket: &str) -> Result<(), &'static str> {
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = bucket.as_bytes();
    let ok = (3..=63).contains(&b.len())
        && b.iter().all(|&c| alnum(c) || c == b'.' || c == b'-')
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && !bucket.contains("..");
    ok.then_some(()).ok_or(
        "the bucket name must be 3 to 63 lowercase letters, digits, dots and hyphens, \
         starting and ending with a letter or digit",
    )
}

/// A key is used as it is (never percent-decoded), but the request URL is
/// built by resolving it against the bucket's: a `.` or `..` segment would be
/// resolved away and a leading `/` would leave the bucket (`//host/x` even
/// the endpoint), so such keys are refused rather than sent elsewhere.
pub(super) fn check_key(key: &str) -> Result<(), &'static str> {
    if key.starts_with('/') || key.split('/').any(|s| s == "." || s == "..") {
        return Err(
            "a key starting with `/` or with a `.` or `..` segment cannot be addressed exactly",
        );
    }
    Ok(())
}

/// Shown without any query string: a presigned URL's signature never prints.
impl fmt::Display for ObjectUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectUrl::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
            ObjectUrl::Https(url) => {
                write!(f, "{}://{}", url.scheme(), url.host_str().unwrap_or(""))?;
                if let Some(port) = url.port() {
                    write!(f, ":{port}")?;
                }
                f.write_str(url.path())
            }
            ObjectUrl::Drs(uri) => write!(f, "{uri}"),
        }
    }
}

/// Where pushed objects live: `s3://{bucket}/{prefix}/{oid[0:2]}/{oid[2:4]}/{oid}`
/// (the layout of `.git/lfs/objects`, so a listing reads like one). Each
/// object carries its oid as `x-amz-meta-sha256`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectLayout {
    pub bucket: String,
    pub prefix: String,
}

impl ObjectLayout {
    /// From `s3://bucket` or `s3://bucket/prefix`.
    pub fn parse(text: &str) -> Result<ObjectLayout, RemoteError> {
        let rest = text
            .strip_prefix("s3://")
            .ok_or_else(|| RemoteError::BadUrl {
                url: text.into(),
                why: "an object remote is s3://bucket[/prefix]".into(),
            })?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(RemoteError::BadUrl {
                url: text.into(),
                why: "no bucket".into(),
            });
        }
        let prefix = prefix.trim_matches('/');
        let bad = |why: &str| RemoteError::BadUrl {
            url: text.into(),
            why: why.into(),
        };
        check_bucket(bucket).map_err(bad)?;
        if !prefix.is_empty() {
            check_key(prefix).map_err(bad)?;
        }
        Ok(ObjectLayout {
            bucket: bucket.into(),
            prefix: prefix.into(),
        })
    }

    pub fn key(&self, oid: &Oid) -> String {
        let hex = oid.to_hex();
        let path = format!("{}/{}/{hex}", &hex[0..2], &hex[2..4]);
        match self.prefix.as_str() {
            "" => path,
            p => format!("{p}/{path}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_keys_follow_git_lfs_objects() {
        let oid = Oid::of(b"x");
        let hex = oid.to_hex();
        let l = ObjectLayout::parse("s3://bkt/team/lfs/").unwrap();
        assert_eq!(
            l.key(&oid),
            format!("team/lfs/{}/{}/{hex}", &hex[..2], &hex[2..4])
        );
        let l = ObjectLayout::parse("s3://bkt").unwrap();
        assert_eq!(l.key(&oid), format!("{}/{}/{hex}", &hex[..2], &hex[2..4]));
        assert!(ObjectLayout::parse("https://bkt").is_err());
        assert!(ObjectLayout::parse("s3:///x").is_err());
        // The keys under a prefix with dot segments would land elsewhere.
        for bad in [
            "s3://bkt/../other",
            "s3://bkt/a/./b",
            "s3://B_kt",
            "s3://ab/p",
        ] {
            assert!(ObjectLayout::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn without_query_drops_the_query_and_the_fragment() {
        assert_eq!(without_query("https://h/a.bam?sig=1#x"), "https://h/a.bam");
        assert_eq!(without_query("https://h/a.bam#x?y"), "https://h/a.bam");
        assert_eq!(without_query("s3://b/k"), "s3://b/k");
        assert_eq!(
            SecretUrl::new("https://h/k?t=2").without_query(),
            "https://h/k"
        );
    }

    #[test]
    fn parses_s3_and_https_and_hides_queries() {
        let s3 = ObjectUrl::parse("s3://bkt/dir/reads.bam").unwrap();
        assert_eq!(s3.to_string(), "s3://bkt/dir/reads.bam");
        assert_eq!(s3.file_name(), Some("reads.bam"));
        let https = ObjectUrl::parse("https://h:8443/a/b.cram?X-Amz-Signature=secret").unwrap();
        assert_eq!(https.to_string(), "https://h:8443/a/b.cram");
        assert_eq!(https.file_name(), Some("b.cram"));
        for bad in [
            "s3://bkt",
            "s3:///key",
            "ftp://h/x",
            "reads.bam",
            "s3://ab/x",
            "s3://Bkt/x",
            "s3://a..b/x",
            "s3://-bkt/x",
            "s3://b_kt/x",
            "s3://bkt/../other/x",
            "s3://bkt/a/./x",
            "s3://bkt//evil.example/x",
        ] {
            let err = ObjectUrl::parse(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
    }

    #[test]
    fn every_signing_parameter_is_redacted_whatever_its_case() {
        let names = [
            "X-Amz-Signature",
            "X-Amz-Credential",
            "X-Amz-Security-Token",
            "Signature",
            "sig",
            "token",
            "access_token",
            "Expires",
            "Key-Pair-Id",
            "Policy",
            "GoogleAccessId",
            "X-Goog-Signature",
            "X-Goog-Credential",
            "AWSAccessKeyId",
            "client_secret",
            "password",
            "key",
        ];
        for name in names {
            for case in [name.to_string(), name.to_lowercase(), name.to_uppercase()] {
                let url = format!("https://h/a/b.bam?part=2&{case}=s3cr3t&format=bam");
                assert_eq!(
                    redacted(&url),
                    format!("https://h/a/b.bam?part=2&{case}=REDACTED&format=bam"),
                    "{url}"
                );
            }
        }
    }

    #[test]
    fn user_info_is_redacted_and_host_port_and_path_stay() {
        assert_eq!(
            redacted("http://user:s3cr3t@127.0.0.1:8080/d/x.bam"),
            "http://REDACTED@127.0.0.1:8080/d/x.bam"
        );
        assert_eq!(
            redacted("https://alice@h/x?X-Amz-Signature=abc"),
            "https://REDACTED@h/x?X-Amz-Signature=REDACTED"
        );
        // An `@` in the path is not user-info.
        assert_eq!(redacted("https://h/a@b/x"), "https://h/a@b/x");
    }

    #[test]
    fn fragments_and_percent_encoded_names_are_redacted_too() {
        assert_eq!(
            redacted("https://h/x#access_token=abc&state=1"),
            "https://h/x#access_token=REDACTED&state=1"
        );
        assert_eq!(
            redacted("https://h/x?X%2DAmz%2DSignature=abc"),
            "https://h/x?X%2DAmz%2DSignature=REDACTED"
        );
        assert_eq!(
            redacted("https://h/x?sig=a?b=c#f"),
            "https://h/x?sig=REDACTED#f"
        );
    }

    #[test]
    fn ordinary_urls_and_parameters_are_left_alone() {
        for url in [
            "s3://bkt/dir/reads.bam",
            "https://h:8443/a/b.cram",
            "https://h/x?versionId=3&partNumber=2&response-content-type=text",
            "https://h/x?format=bam&range=1-2#section",
            "not a url at all",
        ] {
            assert_eq!(redacted(url), url);
        }
    }

    #[test]
    fn urls_inside_a_message_are_redacted_and_the_rest_kept() {
        let text = "error sending request for url (http://u:pw@h/x?sig=abc): refused; \
                    see https://h/y?token=t and 'https://h/z?a=1'";
        assert_eq!(
            redact_text(text),
            "error sending request for url (http://REDACTED@h/x?sig=REDACTED): refused; \
                    see https://h/y?token=REDACTED and 'https://h/z?a=1'"
        );
    }

    #[test]
    fn a_secret_url_formats_redacted_and_exposes_whole() {
        let url = SecretUrl::new("https://u:pw@h/x?X-Amz-Signature=abc");
        for shown in [url.to_string(), format!("{url:?}")] {
            assert!(!shown.contains("pw") && !shown.contains("abc"), "{shown}");
        }
        assert_eq!(url.expose(), "https://u:pw@h/x?X-Amz-Signature=abc");
        let json = serde_json::to_string(&url).unwrap();
        assert_eq!(
            json, "\"https://u:pw@h/x?X-Amz-Signature=abc\"",
            "stored whole"
        );
    }

    /// Found by the property tests (`url_props.rs`): these keys parsed, and
    /// the request went to another object, another bucket, or another host.
    #[test]
    fn keys_that_a_request_url_cannot_address_exactly_are_refused() {
        for text in [
            "s3://bkt/./x",
            "s3://bkt/a/..",
            "s3://bkt/../victim/secret",
            "s3://bkt//evil.example/x",
        ] {
            let err = ObjectUrl::parse(text).unwrap_err().to_string();
            assert!(err.contains("cannot be addressed exactly"), "{text}: {err}");
        }
        // What looks like them but is not a dot segment is kept as it is.
        for key in ["a..b/x", "%2e%2e/x", ".x/..y", "a//b", "a%2Fb c/ü"] {
            let text = format!("s3://bkt/{key}");
            let url = ObjectUrl::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let want = ObjectUrl::S3 {
                bucket: "bkt".into(),
                key: key.into(),
            };
            assert_eq!(url, want);
        }
    }
}
