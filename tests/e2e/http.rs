//! The HTTPS client against a real nginx (tests/with-servers.sh starts it):
//! HEAD, ranged and conditional GETs, the extra trusted root.

use drsd::stores::{HttpClient, HttpConfig, RemoteError};
use drsd_e2e::rt;

fn www(rel: &str, bytes: &[u8]) -> (String, String) {
    let dir = std::env::var("DRSD_TEST_WWW").expect("run under tests/with-servers.sh");
    let path = std::path::Path::new(&dir).join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    let https = format!("{}/{rel}", std::env::var("DRSD_TEST_HTTPS_URL").unwrap());
    let http = format!("{}/{rel}", std::env::var("DRSD_TEST_HTTP_URL").unwrap());
    (https, http)
}

fn url(text: &str) -> url::Url {
    url::Url::parse(text).unwrap()
}

#[test]
fn head_and_conditional_ranged_gets_against_nginx() {
    let rel = format!("http-{}/obj.bin", std::process::id());
    let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let (https, http) = www(&rel, &body);
    let client = HttpClient::new(HttpConfig::from_env().unwrap()).unwrap();
    rt().block_on(async {
        for u in [&https, &http] {
            let meta = client.head(&url(u)).await.unwrap().expect("found");
            assert_eq!(meta.size, body.len() as u64);
            let etag = meta.etag.clone().expect("nginx sends an ETag");
            assert!(
                !etag.contains('"') && etag.ends_with(&format!("-{:x}", body.len())),
                "{etag}"
            );
            assert!(
                meta.last_modified.is_some() && meta.sha256.is_none(),
                "{meta:?}"
            );

            let part = client
                .get_if(&url(u), Some(10..20), Some(&etag))
                .await
                .unwrap();
            assert_eq!(part.status(), 206);
            assert_eq!(part.bytes().await.unwrap().as_ref(), &body[10..20]);

            let err = client.get_if(&url(u), None, Some("0-0")).await.unwrap_err();
            assert!(
                matches!(err, RemoteError::Http { status: 412, .. }),
                "{err}"
            );
        }
        let gone = format!("{https}.missing?X-Amz-Signature=secret");
        assert_eq!(client.head(&url(&gone)).await.unwrap(), None);
    });
}

#[test]
fn without_the_extra_root_the_self_signed_server_is_refused_by_name() {
    let rel = format!("http-{}/t.bin", std::process::id());
    let (https, _) = www(&rel, b"tls");
    let config = HttpConfig {
        ca_file: None,
        retry: drsd::stores::Retry {
            attempts: 1,
            first_delay: std::time::Duration::from_millis(1),
        },
        ..HttpConfig::from_env().unwrap()
    };
    let client = HttpClient::new(config).unwrap();
    let signed = format!("{https}?X-Amz-Signature=secret");
    let err = rt()
        .block_on(client.head(&url(&signed)))
        .unwrap_err()
        .to_string();
    assert!(err.contains(&https) && err.contains("certificate"), "{err}");
    assert!(!err.contains("secret"), "{err}");
}
