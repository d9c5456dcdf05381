//! The commons' bucket in a real S3 store (Ceph RGW in the benchmarks), as
//! a deployed commons has it: Fence signs URLs into a bucket the user holds
//! no keys for, and begins and completes multipart uploads there with its
//! own keys. Chosen with [`super::DrsServer::start_on_s3`]; without it the
//! bucket is the server's own (`bucket.rs`), which counts what it takes.

use std::time::Duration;

use rusty_s3::actions::{CreateMultipartUpload, S3Action};
use rusty_s3::{Bucket, Credentials, UrlStyle};

/// Where the bucket is and the keys Fence holds for it.
#[derive(Debug, Clone)]
pub struct S3Target {
    pub endpoint: String,
    pub region: String,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: String,
}

impl S3Target {
    /// The store the tests' servers run (`AWS_ENDPOINT_URL`, `AWS_REGION`,
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`), bucket `bucket`.
    pub fn from_env(bucket: &str) -> S3Target {
        let var = |name: &str| {
            std::env::var(name)
                .unwrap_or_else(|_| panic!("{name} is not set: run under tests/with-servers.sh"))
        };
        S3Target {
            endpoint: var("AWS_ENDPOINT_URL"),
            region: var("AWS_REGION"),
            bucket: bucket.to_string(),
            access_key: var("AWS_ACCESS_KEY_ID"),
            secret_key: var("AWS_SECRET_ACCESS_KEY"),
        }
    }
}

/// Time the signatures of Fence's own calls to the store are good for.
const OWN_CALL: Duration = Duration::from_secs(300);

pub(crate) struct S3Bucket {
    bucket: Bucket,
    keys: Credentials,
    http: reqwest::Client,
}

impl S3Bucket {
    pub(crate) fn new(target: &S3Target) -> S3Bucket {
        let endpoint = target.endpoint.parse().expect("the S3 endpoint is a URL");
        S3Bucket {
            bucket: Bucket::new(
                endpoint,
                UrlStyle::Path,
                target.bucket.clone(),
                target.region.clone(),
            )
            .expect("a usable bucket name"),
            keys: Credentials::new(target.access_key.clone(), target.secret_key.clone()),
            http: reqwest::Client::new(),
        }
    }

    pub(crate) fn name(&self) -> &str {
        self.bucket.name()
    }

    /// A URL that PUTs the whole object `key`.
    pub(crate) fn put_url(&self, key: &str, ttl: u64) -> String {
        let action = self.bucket.put_object(Some(&self.keys), key);
        action.sign(Duration::from_secs(ttl)).to_string()
    }

    /// A URL that GETs object `key`.
    pub(crate) fn get_url(&self, key: &str, ttl: u64) -> String {
        let action = self.bucket.get_object(Some(&self.keys), key);
        action.sign(Duration::from_secs(ttl)).to_string()
    }

    /// A URL that PUTs part `number` of upload `upload` of `key`.
    pub(crate) fn part_url(&self, key: &str, upload: &str, number: u16, ttl: u64) -> String {
        let action = self
            .bucket
            .upload_part(Some(&self.keys), key, number, upload);
        action.sign(Duration::from_secs(ttl)).to_string()
    }

    /// Begins a multipart upload of `key` in the store: its upload id.
    pub(crate) async fn begin(&self, key: &str) -> Result<String, String> {
        let url = self
            .bucket
            .create_multipart_upload(Some(&self.keys), key)
            .sign(OWN_CALL);
        let body = self.call(self.http.post(url)).await?;
        let answer = CreateMultipartUpload::parse_response(&body).map_err(|e| e.to_string())?;
        Ok(answer.upload_id().to_string())
    }

    /// Completes upload `upload` of `key` with `etags`, in part order.
    pub(crate) async fn complete(
        &self,
        key: &str,
        upload: &str,
        etags: &[String],
    ) -> Result<(), String> {
        let action = self.bucket.complete_multipart_upload(
            Some(&self.keys),
            key,
            upload,
            etags.iter().map(String::as_str),
        );
        let url = action.sign(OWN_CALL);
        self.call(self.http.post(url).body(action.body())).await?;
        Ok(())
    }

    /// The body of a call the store took; its words when it refused.
    async fn call(&self, request: reqwest::RequestBuilder) -> Result<String, String> {
        let resp = request.send().await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = resp.text().await.map_err(|e| e.to_string())?;
        match status.is_success() && !body.contains("<Error>") {
            true => Ok(body),
            false => Err(format!("{status}: {body}")),
        }
    }
}
