use std::fmt;

use super::RemoteError;

/// Where a remote object lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ObjectUrl {
    S3 { bucket: String, key: String },
    Https(url::Url),
}

impl ObjectUrl {
    pub fn parse(text: &str) -> Result<ObjectUrl, RemoteError> {
        let bad = |why: &str| RemoteError::BadUrl {
            url: text.chars().take(200).collect(),
            why: why.into(),
        };
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
            _ => Err(bad("want s3://bucket/key or https://host/path")),
        }
    }

    /// The last path segment: the default file name for the object.
    pub fn file_name(&self) -> Option<&str> {
        let path = match self {
            ObjectUrl::S3 { key, .. } => key.as_str(),
            ObjectUrl::Https(url) => url.path(),
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
