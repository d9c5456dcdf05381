//! Property tests of object URL parsing (`cargo nextest run -p drsd props`):
//! any text is parsed or refused without a panic; an accepted `s3://` URL
//! names a valid bucket and a non-empty key, and the request URL built for
//! it addresses exactly that key (dots, `%2F`, spaces, unicode and all);
//! an `https://` URL keeps its host and never shows its user info or query.

use proptest::prelude::*;
use rusty_s3::{Bucket, UrlStyle};

use super::url::ObjectUrl;
use super::ObjectLayout;
use crate::pool::Oid;
use crate::props::config;

/// S3's bucket naming rules, written out apart from the parser's.
fn is_valid_bucket(b: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (3..=63).contains(&b.len())
        && b.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
        && edge(b.chars().next())
        && edge(b.chars().last())
        && !b.contains("..")
}

fn bucket() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9][a-z0-9.-]{1,20}[a-z0-9]",
        // No `/`: it would only move where the bucket ends.
        1 => "[a-zA-Z0-9._~%?#:@!-]{0,8}",
        1 => Just("..".to_string()),
        1 => Just("a".repeat(64)),
    ]
}

/// Keys with what breaks naive URL building.
fn key() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        4 => "[a-zA-Z0-9_-]{1,8}",
        1 => Just(".".to_string()),
        1 => Just("..".to_string()),
        1 => Just(String::new()),
        1 => Just("%2F".to_string()),
        1 => Just("%2e%2E".to_string()),
        1 => Just("a b".to_string()),
        1 => Just(" lead and trail ".to_string()),
        1 => Just("ünï/cødé".to_string()),
        1 => Just("q?x=1#frag".to_string()),
        1 => Just("back\\slash".to_string()),
        1 => Just("+&=;,$@:'()*!".to_string()),
        1 => any::<String>(),
    ];
    proptest::collection::vec(segment, 1..5).prop_map(|s| s.join("/"))
}

/// The object key a request URL addresses, read back from its path.
fn addressed_key(url: &url::Url, prefix: &str) -> Option<String> {
    let rest = url.path().strip_prefix(prefix)?;
    let (mut out, mut bytes) = (Vec::new(), rest.bytes());
    while let Some(b) = bytes.next() {
        if b != b'%' {
            out.push(b);
            continue;
        }
        let hex = [bytes.next()?, bytes.next()?];
        out.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
    }
    String::from_utf8(out).ok()
}

fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        // At most one hyphen a label: `xn--` would be punycode, refused when invalid.
        "[a-z][a-z0-9]{0,5}(-[a-z0-9]{1,4})?(\\.[a-z][a-z0-9]{0,5}(-[a-z0-9]{1,4})?){0,3}",
        Just("127.0.0.1".to_string()),
        Just("[::1]".to_string()),
    ]
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn any_text_is_parsed_or_refused_without_a_panic(text in any::<String>()) {
        if let Ok(url) = ObjectUrl::parse(&text) {
            let _ = url.file_name();
            let _ = url.to_string();
        }
    }

    #[test]
    fn any_s3_text_is_parsed_or_refused_without_a_panic(rest in any::<String>()) {
        let _ = ObjectUrl::parse(&format!("s3://{rest}"));
    }

    #[test]
    fn an_accepted_s3_url_names_a_valid_bucket_and_addresses_exactly_its_key(
        bucket in bucket(),
        key in key(),
    ) {
        let text = format!("s3://{bucket}/{key}");
        let Ok(url) = ObjectUrl::parse(&text) else {
            return Ok(());
        };
        let ObjectUrl::S3 { bucket: b, key: k } = &url else {
            return Err(TestCaseError::fail(format!("{text}: not s3")));
        };
        prop_assert!(is_valid_bucket(b), "{}: bucket {:?}", text, b);
        prop_assert_eq!(b, &bucket);
        prop_assert_eq!(k, &key, "the key is taken as it is, never decoded");
        prop_assert!(!k.is_empty());
        prop_assert_eq!(ObjectUrl::parse(&url.to_string()).ok(), Some(url.clone()));
        if let Some(name) = url.file_name() {
            prop_assert!(!name.contains('/') && name != "." && name != "..", "{:?}", name);
        }
        // The request goes to that bucket and key, path-style (RGW) and
        // virtual-host style (AWS) alike.
        let endpoint = url::Url::parse("https://s3.example.test/").unwrap();
        for (style, prefix) in [
            (UrlStyle::Path, format!("/{b}/")),
            (UrlStyle::VirtualHost, "/".to_string()),
        ] {
            let s3 = Bucket::new(endpoint.clone(), style, b.clone(), "us-east-1").unwrap();
            let request = s3.object_url(k).unwrap();
            let host = match style {
                UrlStyle::Path => "s3.example.test".to_string(),
                UrlStyle::VirtualHost => format!("{b}.s3.example.test"),
            };
            prop_assert_eq!(request.host_str(), Some(host.as_str()), "{}", request);
            let addressed = addressed_key(&request, &prefix);
            prop_assert_eq!(addressed.as_ref(), Some(k), "{}", request);
            prop_assert!(request.query().is_none() && request.fragment().is_none(), "{}", request);
        }
    }

    #[test]
    fn an_https_url_keeps_its_host_and_never_shows_its_user_info_or_query(
        scheme in prop::sample::select(vec!["https", "http"]),
        host in host(),
        port in proptest::option::of(1u16..),
        path in "(/[a-zA-Z0-9._ %-]{0,10}){0,4}",
        secret in "[a-zA-Z0-9]{12}",
        userinfo in any::<bool>(),
    ) {
        let auth = if userinfo { format!("user:{secret}@") } else { String::new() };
        let port_text = port.map(|p| format!(":{p}")).unwrap_or_default();
        let text = format!("{scheme}://{auth}{host}{port_text}{path}?X-Amz-Signature={secret}");
        let url = ObjectUrl::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let ObjectUrl::Https(u) = &url else {
            return Err(TestCaseError::fail(format!("{text}: not https")));
        };
        prop_assert_eq!(u.host_str(), Some(host.as_str()));
        let shown = url.to_string();
        prop_assert!(shown.starts_with(&format!("{scheme}://{host}")), "{}", shown);
        prop_assert!(!shown.contains(&secret), "{}", shown);
        if let Some(name) = url.file_name() {
            prop_assert!(!name.contains('/') && name != "." && name != "..", "{:?}", name);
        }
    }

    #[test]
    fn an_accepted_object_remote_puts_each_object_at_exactly_its_key(
        bucket in bucket(),
        prefix in proptest::option::of(key()),
        digest in any::<[u8; 32]>(),
    ) {
        let text = match &prefix {
            Some(p) => format!("s3://{bucket}/{p}"),
            None => format!("s3://{bucket}"),
        };
        let Ok(layout) = ObjectLayout::parse(&text) else {
            return Ok(());
        };
        prop_assert!(is_valid_bucket(&layout.bucket), "{}", text);
        let key = layout.key(&Oid::from_digest(digest));
        let endpoint = url::Url::parse("http://127.0.0.1:8000/").unwrap();
        let s3 = Bucket::new(endpoint, UrlStyle::Path, layout.bucket.clone(), "us-east-1").unwrap();
        let request = s3.object_url(&key).unwrap();
        let addressed = addressed_key(&request, &format!("/{}/", layout.bucket));
        prop_assert_eq!(addressed, Some(key), "{}", request);
    }
}
