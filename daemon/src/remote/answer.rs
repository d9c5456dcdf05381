//! What a GET's answer must say before a byte of its body is used.
//!
//! Servers do not all honour what a request asks: python's http.server and
//! many simple servers ignore `Range` and send the whole object with 200;
//! a proxy or a store may ignore `If-Match` and send another version; a
//! broken or hostile one may send another range than the one asked. Each
//! answer is checked against the request: its status, its `ETag` (strongly
//! equal to the pinned one), its `Last-Modified` (when pinned and sent),
//! its `Content-Range` (the very range asked, of an object of the expected
//! size), its `Content-Length` and encoding. The body's length is checked
//! as it streams (`download.rs`).

use std::ops::Range;

use reqwest::header::HeaderMap;
use reqwest::StatusCode;

/// What a GET asked for.
pub(super) struct Asked<'a> {
    /// The bytes asked with `Range`; `None` for the whole object.
    pub range: Option<Range<u64>>,
    /// The object's size, as recorded.
    pub size: u64,
    /// The ETag the request is pinned to (`If-Match`), without quotes.
    pub etag: Option<&'a str>,
    /// The `Last-Modified` recorded with the ETag, when the ETag alone does
    /// not identify the content (see `Fetch::last_modified`).
    pub last_modified: Option<&'a str>,
}

/// An answer that may be used.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fits {
    /// The bytes asked, no more, no less.
    Asked,
    /// A 200 to a ranged request for part of the object: the server does
    /// not do ranges, and the body is the whole object from byte 0. It is
    /// not used; the object is fetched again in one stream.
    NoRanges,
}

/// Why an answer may not be used.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Unfit {
    /// It is of another version of the object than the one pinned.
    Changed(String),
    /// It is not an answer to what was asked.
    Wrong(String),
}

/// Checks the status and headers of an answer to `asked`.
pub(super) fn check(
    asked: &Asked<'_>,
    status: StatusCode,
    headers: &HeaderMap,
) -> Result<Fits, Unfit> {
    let get = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or("(not text)"))
    };
    check_version(asked, get("etag"), get("last-modified"))?;
    if let Some(enc) = get("content-encoding").filter(|e| !e.eq_ignore_ascii_case("identity")) {
        return Err(Unfit::Wrong(format!(
            "it sent the body encoded ({enc}), not the object's bytes"
        )));
    }
    let whole = 0..asked.size;
    let fits = match (&asked.range, status) {
        (Some(range), StatusCode::PARTIAL_CONTENT) => {
            check_content_range(range, asked.size, get("content-range"))?;
            range.clone()
        }
        // The whole object asked as a range: a 200 is the same bytes.
        (Some(range), StatusCode::OK) if *range == whole => whole,
        (Some(_), StatusCode::OK) => return Ok(Fits::NoRanges),
        (None, StatusCode::OK) => whole,
        (range, status) => {
            let asked = match range {
                Some(r) => format!("bytes {}-{}", r.start, r.end.saturating_sub(1)),
                None => "the whole object".into(),
            };
            return Err(Unfit::Wrong(format!("HTTP {status} to a GET of {asked}")));
        }
    };
    check_length(&fits, get("content-length"))?;
    Ok(Fits::Asked)
}

/// The ETag must be the pinned one, strongly: a weak ETag (`W/"..."`) does
/// not name bytes, and none at all proves nothing.
fn check_version(
    asked: &Asked<'_>,
    etag: Option<&str>,
    last_modified: Option<&str>,
) -> Result<(), Unfit> {
    if let Some(pinned) = asked.etag {
        let Some(sent) = etag else {
            return Err(Unfit::Changed(format!(
                "it answered without an ETag; the download is pinned to \"{pinned}\""
            )));
        };
        let strong = sent
            .trim()
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'));
        let bare = sent.trim();
        // S3-style stores always quote it; a few servers do not.
        let tag = strong.unwrap_or(bare);
        if bare.starts_with("W/") || tag != pinned {
            return Err(Unfit::Changed(format!(
                "it answered with ETag {sent}, not the pinned \"{pinned}\""
            )));
        }
    }
    if let (Some(pinned), Some(sent)) = (asked.last_modified, last_modified) {
        if sent.trim() != pinned.trim() {
            return Err(Unfit::Changed(format!(
                "it answered with Last-Modified {sent}, not {pinned} as when it was added"
            )));
        }
    }
    Ok(())
}

/// `Content-Range: bytes FIRST-LAST/TOTAL` must be the range asked, of an
/// object of the recorded size.
fn check_content_range(range: &Range<u64>, size: u64, sent: Option<&str>) -> Result<(), Unfit> {
    let want = format!("bytes {}-{}/{size}", range.start, range.end - 1);
    let Some(sent) = sent else {
        return Err(Unfit::Wrong(format!(
            "HTTP 206 without a Content-Range; asked {want}"
        )));
    };
    let Some((first, last, total)) = parse_content_range(sent) else {
        return Err(Unfit::Wrong(format!(
            "an unreadable Content-Range {sent:?}; asked {want}"
        )));
    };
    if total != Some(size) {
        return Err(Unfit::Changed(format!(
            "its Content-Range {sent:?} gives a size other than the {size} bytes recorded"
        )));
    }
    if (first, last + 1) != (range.start, range.end) {
        return Err(Unfit::Wrong(format!(
            "it sent Content-Range {sent:?}, not the {want} asked"
        )));
    }
    Ok(())
}

/// `bytes FIRST-LAST/TOTAL` (TOTAL `*` when unknown: `None`).
fn parse_content_range(text: &str) -> Option<(u64, u64, Option<u64>)> {
    let rest = text.trim().strip_prefix("bytes ")?;
    let (span, total) = rest.split_once('/')?;
    let (first, last) = span.split_once('-')?;
    let number = |t: &str| {
        let t = t.trim();
        (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .then(|| t.parse::<u64>().ok())
            .flatten()
    };
    let total = match total.trim() {
        "*" => None,
        t => Some(number(t)?),
    };
    let (first, last) = (number(first)?, number(last)?);
    (first <= last).then_some((first, last, total))
}

/// A `Content-Length`, when sent, must be the length of the bytes asked.
fn check_length(fits: &Range<u64>, sent: Option<&str>) -> Result<(), Unfit> {
    let Some(sent) = sent else {
        return Ok(()); // chunked: the body's length is checked as it streams
    };
    let want = fits.end - fits.start;
    if sent.trim().parse::<u64>().ok() != Some(want) {
        return Err(Unfit::Wrong(format!(
            "Content-Length {sent} for the {want} bytes asked"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().unwrap());
        }
        map
    }

    fn asked(range: Option<Range<u64>>) -> Asked<'static> {
        Asked {
            range,
            size: 100,
            etag: Some("v1"),
            last_modified: None,
        }
    }

    const OK: StatusCode = StatusCode::OK;
    const PART: StatusCode = StatusCode::PARTIAL_CONTENT;

    #[test]
    fn the_range_asked_with_the_pinned_etag_fits() {
        let h = headers(&[
            ("etag", "\"v1\""),
            ("content-range", "bytes 10-19/100"),
            ("content-length", "10"),
        ]);
        assert_eq!(check(&asked(Some(10..20)), PART, &h), Ok(Fits::Asked));
        let whole = headers(&[("etag", "\"v1\""), ("content-length", "100")]);
        assert_eq!(check(&asked(Some(0..100)), OK, &whole), Ok(Fits::Asked));
        assert_eq!(check(&asked(None), OK, &whole), Ok(Fits::Asked));
    }

    #[test]
    fn a_200_to_a_range_of_part_of_the_object_means_no_ranges() {
        let h = headers(&[("etag", "\"v1\""), ("content-length", "100")]);
        assert_eq!(check(&asked(Some(0..10)), OK, &h), Ok(Fits::NoRanges));
        assert_eq!(check(&asked(Some(50..60)), OK, &h), Ok(Fits::NoRanges));
    }

    #[test]
    fn another_etag_a_weak_one_or_none_is_a_change() {
        for etag in [Some("\"v2\""), Some("W/\"v1\""), None] {
            let mut pairs = vec![("content-range", "bytes 0-9/100")];
            if let Some(e) = etag {
                pairs.push(("etag", e));
            }
            let got = check(&asked(Some(0..10)), PART, &headers(&pairs));
            assert!(matches!(got, Err(Unfit::Changed(_))), "{etag:?}: {got:?}");
        }
    }

    #[test]
    fn another_last_modified_is_a_change_when_pinned() {
        let pinned = Asked {
            last_modified: Some("Mon, 01 Jan 2024 00:00:00 GMT"),
            ..asked(None)
        };
        let h = headers(&[
            ("etag", "\"v1\""),
            ("last-modified", "Tue, 02 Jan 2024 00:00:00 GMT"),
        ]);
        assert!(matches!(check(&pinned, OK, &h), Err(Unfit::Changed(_))));
    }

    #[test]
    fn another_range_or_total_or_length_or_status_is_refused() {
        type Case = (&'static [(&'static str, &'static str)], StatusCode, bool);
        const RANGE: (&str, &str) = ("content-range", "bytes 10-19/100");
        let cases: [Case; 7] = [
            (&[("content-range", "bytes 0-9/100")], PART, false),
            (&[("content-range", "bytes 10-20/100")], PART, false),
            (&[("content-range", "bytes 10-19/101")], PART, true),
            (&[("content-range", "bytes 10-19/*")], PART, true),
            (&[], PART, false),
            (&[RANGE, ("content-length", "11")], PART, false),
            (&[RANGE], StatusCode::NO_CONTENT, false),
        ];
        for (pairs, status, changed) in cases {
            let mut all = vec![("etag", "\"v1\"")];
            all.extend_from_slice(pairs);
            let got = check(&asked(Some(10..20)), status, &headers(&all));
            let ok = if changed {
                matches!(got, Err(Unfit::Changed(_)))
            } else {
                matches!(got, Err(Unfit::Wrong(_)))
            };
            assert!(ok, "{pairs:?} {status}: {got:?}");
        }
    }

    #[test]
    fn an_encoded_body_is_refused() {
        let h = headers(&[("etag", "\"v1\""), ("content-encoding", "gzip")]);
        assert!(matches!(check(&asked(None), OK, &h), Err(Unfit::Wrong(_))));
    }
}
