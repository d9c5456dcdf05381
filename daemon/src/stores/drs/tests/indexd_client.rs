//! The Indexd client: lookups checked against what was asked, and
//! registration with the netrc login of the Indexd host.

use std::path::Path;

use super::{quick, reply, status, TestServer};
use crate::pool::Oid;
use crate::stores::drs::{DrsError, IndexdClient, NetrcFile, NewRecord};

fn client(server: &TestServer, netrc: Option<&Path>) -> IndexdClient {
    let netrc = match netrc {
        Some(path) => NetrcFile::at(path.to_path_buf()),
        None => NetrcFile::locate(|_| None),
    };
    IndexdClient::with_netrc(
        crate::stores::drs::Api::new(&quick()).unwrap(),
        server.root.clone(),
        netrc,
    )
}

fn new_record() -> NewRecord {
    NewRecord {
        size: 3,
        sha256: Oid::of(b"abc"),
        md5: "900150983cd24fb0d6963f7d28e17f72".into(),
        etag: None,
        urls: vec!["s3://bkt/k.bam".into()],
        file_name: "k.bam".into(),
        authz: vec!["/programs/p".into()],
    }
}

fn record(did: &str, sha256: &str) -> serde_json::Value {
    serde_json::json!({
        "did": did, "size": 3, "hashes": {"sha256": sha256, "md5": "900150983cd24fb0d6963f7d28e17f72"},
        "urls": ["s3://bkt/k.bam"], "file_name": "k.bam", "authz": null, "rev": "r1"
    })
}

#[tokio::test]
async fn a_lookup_by_sha256_keeps_only_records_of_that_content() {
    let oid = Oid::of(b"abc");
    let server = TestServer::start(move |_, _| {
        reply(
            200,
            serde_json::json!({"records": [
                record("dg.TEST/1", &oid.to_hex().to_uppercase()),
                record("dg.TEST/2", &Oid::of(b"other").to_hex()),
            ]}),
        )
    })
    .await;
    let got = client(&server, None).by_sha256(oid).await.unwrap();
    let dids: Vec<&str> = got.iter().map(|r| r.did.as_str()).collect();
    assert_eq!(dids, ["dg.TEST/1"]);
    assert!(got[0].authz.is_empty(), "null reads as empty");
    let seen = &server.seen()[0];
    assert_eq!(seen.path, "/index");
    assert_eq!(
        seen.query.as_deref(),
        Some(format!("hash=sha256%3A{}", oid.to_hex()).as_str())
    );
}

#[tokio::test]
async fn a_record_is_fetched_by_its_did_and_must_be_that_record() {
    let sha = Oid::of(b"abc").to_hex();
    let server = TestServer::start(move |seen, _| match seen.path.as_str() {
        "/index/dg.TEST/u1" => reply(200, record("dg.TEST/u1", &sha)),
        "/index/dg.TEST/liar" => reply(200, record("dg.TEST/u1", &sha)),
        _ => status(404),
    })
    .await;
    let client = client(&server, None);
    assert_eq!(
        client.get("dg.TEST/u1").await.unwrap().unwrap().did,
        "dg.TEST/u1"
    );
    assert_eq!(client.get("dg.TEST/none").await.unwrap(), None);
    let err = client.get("dg.TEST/liar").await.unwrap_err();
    assert!(matches!(err, DrsError::BadAnswer { .. }), "{err}");
}

#[tokio::test]
async fn registration_sends_basic_from_the_netrc_login_of_the_indexd_host() {
    let dir = tempfile::tempdir().unwrap();
    let netrc = dir.path().join("netrc");
    std::fs::write(
        &netrc,
        "machine 127.0.0.1\n  login indexer\n  password pw\n",
    )
    .unwrap();
    let server =
        TestServer::start(
            |seen, _| match (seen.method.as_str(), seen.authorization.as_deref()) {
                ("POST", Some("Basic aW5kZXhlcjpwdw==")) if seen.path == "/index/" => {
                    let body = seen.json();
                    assert_eq!(body["form"], "object");
                    assert_eq!(body["hashes"]["md5"], "900150983cd24fb0d6963f7d28e17f72");
                    reply(
                        200,
                        serde_json::json!({"did": "dg.TEST/new-1", "rev": "r", "baseid": "b"}),
                    )
                }
                _ => status(403),
            },
        )
        .await;
    let did = client(&server, Some(&netrc))
        .register(&new_record())
        .await
        .unwrap();
    assert_eq!(did, "dg.TEST/new-1");
}

#[tokio::test]
async fn a_refused_registration_names_the_host_and_the_credential_tried() {
    let dir = tempfile::tempdir().unwrap();
    let netrc = dir.path().join("netrc");
    std::fs::write(
        &netrc,
        "machine 127.0.0.1 login indexer password wrong-s3cr3t\n",
    )
    .unwrap();
    let server = TestServer::start(|_, _| status(403)).await;
    for (file, tried) in [
        (None, "no credentials".to_string()),
        (
            Some(netrc.as_path()),
            format!("{} login for 127.0.0.1", netrc.display()),
        ),
    ] {
        let err = client(&server, file)
            .register(&new_record())
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, DrsError::Auth { status: 403, .. }), "{text}");
        assert!(
            text.contains(&server.root.to_string()) && text.contains(&tried),
            "{text}"
        );
        assert!(!text.contains("s3cr3t"), "{text}");
    }
}

#[tokio::test]
async fn a_new_did_that_is_not_a_printable_name_is_refused() {
    let server =
        TestServer::start(|_, _| reply(200, serde_json::json!({"did": "dg.TEST/x\nforged"}))).await;
    let err = client(&server, None)
        .register(&new_record())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("printable") && !err.contains('\n'), "{err}");
}

#[tokio::test]
async fn a_refused_registration_quotes_indexds_error_body() {
    let server = TestServer::start(|_, _| {
        reply(
            403,
            serde_json::json!({"error": "Arborist is not configured; cannot perform authorization check"}),
        )
    })
    .await;
    let err = client(&server, None)
        .register(&new_record())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, DrsError::Auth { status: 403, .. })
            && text.contains("the server says \"Arborist is not configured"),
        "{text}"
    );
}
