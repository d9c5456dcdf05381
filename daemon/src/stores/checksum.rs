//! A content SHA-256 that a store states in its response headers, so an
//! object can be named by its content oid without reading it.
//!
//! Accepted, in this order:
//! - `x-amz-meta-sha256`: the hex sha256 drsd attaches to what it uploads;
//! - `x-amz-checksum-sha256` (S3 additional checksums, base64), unless it is a
//!   composite of part checksums (`-N` suffix or `x-amz-checksum-type:
//!   COMPOSITE`): that is not the sha256 of the whole object;
//! - `Repr-Digest: sha-256=:BASE64:` (RFC 9530) and `Digest: SHA-256=BASE64`
//!   (RFC 3230), unless a `Content-Encoding` makes them describe other bytes.

use base64::Engine;
use reqwest::header::HeaderMap;

use super::SHA256_META;

/// The object's content sha256 as 64 lowercase hex digits, when a header states it.
pub fn content_sha256(headers: &HeaderMap) -> Option<String> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(hex) = get(SHA256_META).and_then(parse_hex) {
        return Some(hex);
    }
    let composite = get("x-amz-checksum-type").is_some_and(|t| t.eq_ignore_ascii_case("COMPOSITE"));
    if let Some(value) = get("x-amz-checksum-sha256").filter(|_| !composite) {
        if !value.contains('-') {
            if let Some(hex) = from_base64(value) {
                return Some(hex);
            }
        }
    }
    let encoded = get("content-encoding").is_some_and(|e| !e.eq_ignore_ascii_case("identity"));
    if encoded {
        return None;
    }
    get("repr-digest")
        .and_then(|v| digest_field(v, ":"))
        .or_else(|| get("digest").and_then(|v| digest_field(v, "")))
}

fn parse_hex(text: &str) -> Option<String> {
    let text = text.trim().to_ascii_lowercase();
    (text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())).then_some(text)
}

fn from_base64(text: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()?;
    (bytes.len() == 32).then(|| hex::encode(bytes))
}

/// The sha-256 member of a digest list: `sha-256=:B64:` (`wrap` ":") or
/// `SHA-256=B64` (`wrap` "").
fn digest_field(value: &str, wrap: &str) -> Option<String> {
    value.split(',').find_map(|item| {
        let (alg, b64) = item.trim().split_once('=')?;
        if !alg.trim().eq_ignore_ascii_case("sha-256") {
            return None;
        }
        let b64 = b64.trim();
        let b64 = b64.strip_prefix(wrap)?.strip_suffix(wrap)?;
        from_base64(b64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // sha256("hello")
    const HEX: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
    const B64: &str = "LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn full_object_checksums_are_read() {
        for pairs in [
            vec![(SHA256_META, HEX)],
            vec![(SHA256_META, &HEX.to_uppercase()[..])],
            vec![("x-amz-checksum-sha256", B64)],
            vec![
                ("x-amz-checksum-sha256", B64),
                ("x-amz-checksum-type", "FULL_OBJECT"),
            ],
            vec![("repr-digest", &format!("md5=:abc=:, sha-256=:{B64}:")[..])],
            vec![("digest", &format!("SHA-256={B64}")[..])],
        ] {
            assert_eq!(
                content_sha256(&headers(&pairs)).as_deref(),
                Some(HEX),
                "{pairs:?}"
            );
        }
    }

    #[test]
    fn composites_encodings_and_junk_are_not_content_hashes() {
        for pairs in [
            vec![("x-amz-checksum-sha256", &format!("{B64}-3")[..])],
            vec![
                ("x-amz-checksum-sha256", B64),
                ("x-amz-checksum-type", "COMPOSITE"),
            ],
            vec![
                ("repr-digest", &format!("sha-256=:{B64}:")[..]),
                ("content-encoding", "gzip"),
            ],
            vec![(SHA256_META, "abc")],
            vec![("x-amz-checksum-sha256", "bm90IDMyIGJ5dGVz")],
            vec![("digest", "md5=abc")],
            vec![],
        ] {
            assert_eq!(content_sha256(&headers(&pairs)), None, "{pairs:?}");
        }
    }
}
