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
        for bad in ["s3://bkt", "s3:///key", "ftp://h/x", "reads.bam"] {
            let err = ObjectUrl::parse(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
    }
}
