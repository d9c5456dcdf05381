//! Many access URLs in one request (`POST /objects/access`): answers
//! matched to what was asked, servers without it remembered, and what it
//! leaves out asked one by one.

use super::{quick, reply, status, Reply, Seen, TestServer};
use crate::stores::drs::{AccessWanted, DrsAuth, DrsClient, DrsUri};

const API: &str = "/ga4gh/drs/v1";
const BULK: &str = "/ga4gh/drs/v1/objects/access";

fn client(server: &TestServer) -> DrsClient {
    DrsClient::new(&quick(), server.servers("dg.TEST"), DrsAuth::none()).unwrap()
}

fn wanted(id: &str, access: &str) -> AccessWanted {
    AccessWanted {
        uri: DrsUri::parse(&format!("drs://dg.TEST:{id}")).unwrap(),
        object_id: format!("dg.TEST/{id}"),
        access_id: access.into(),
    }
}

fn line(id: &str, access: &str, url: &str) -> serde_json::Value {
    serde_json::json!({"drs_object_id": id, "drs_access_id": access, "url": url})
}

/// The pairs a bulk request asked, as `(object id, access id)`.
fn asked_pairs(seen: &Seen) -> Vec<(String, String)> {
    let body = seen.json();
    let mut out = Vec::new();
    for entry in body["bulk_object_access_ids"].as_array().unwrap() {
        let id = entry["bulk_object_id"].as_str().unwrap();
        for access in entry["bulk_access_ids"].as_array().unwrap() {
            out.push((id.to_string(), access.as_str().unwrap().to_string()));
        }
    }
    out
}

/// A server that signs every pair asked, and answers `extra` lines too.
fn signing(extra: Vec<serde_json::Value>) -> impl Fn(&Seen, &[Seen]) -> Reply {
    move |seen, _| {
        if seen.path != BULK || seen.method != "POST" {
            return status(404);
        }
        let mut lines: Vec<serde_json::Value> = asked_pairs(seen)
            .iter()
            .map(|(id, a)| line(id, a, &format!("https://store.example/{id}?sig=s3cr3t")))
            .collect();
        lines.extend(extra.iter().cloned());
        let n = lines.len();
        reply(
            200,
            serde_json::json!({
                "summary": {"requested": n, "resolved": n, "unresolved": 0},
                "unresolved_drs_objects": [],
                "resolved_drs_object_access_urls": lines,
            }),
        )
    }
}

#[tokio::test]
async fn the_urls_of_many_objects_come_in_one_request_each_matched_to_what_was_asked() {
    let server = TestServer::start(signing(Vec::new())).await;
    let asked = [wanted("a", "s3"), wanted("b", "s3"), wanted("c", "gs")];
    let urls = client(&server).bulk_access(&asked).await;
    assert_eq!(server.count("POST", BULK), 1);
    assert_eq!(urls.len(), 3);
    let got = &urls[&("dg.TEST/c".to_string(), "gs".to_string())];
    assert_eq!(
        got.url.expose(),
        "https://store.example/dg.TEST/c?sig=s3cr3t"
    );
    let posted = server.seen().into_iter().find(|s| s.path == BULK).unwrap();
    assert_eq!(
        asked_pairs(&posted),
        vec![
            ("dg.TEST/a".to_string(), "s3".to_string()),
            ("dg.TEST/b".to_string(), "s3".to_string()),
            ("dg.TEST/c".to_string(), "gs".to_string()),
        ]
    );
}

#[tokio::test]
async fn a_url_for_an_object_or_access_id_nobody_asked_for_is_refused() {
    let server = TestServer::start(signing(vec![
        line("dg.TEST/intruder", "s3", "https://evil.example/x"),
        line("dg.TEST/a", "gs", "https://evil.example/a"),
        serde_json::json!({"url": "https://evil.example/anonymous"}),
    ]))
    .await;
    let urls = client(&server).bulk_access(&[wanted("a", "s3")]).await;
    assert_eq!(urls.len(), 1, "{:?}", urls.keys());
    let kept = &urls[&("dg.TEST/a".to_string(), "s3".to_string())];
    assert!(!kept.url.expose().contains("evil"));
}

#[tokio::test]
async fn a_url_that_fails_the_checks_of_a_single_access_url_is_refused_and_the_others_kept() {
    let server = TestServer::start(|seen, _| {
        let pairs = asked_pairs(seen);
        reply(
            200,
            serde_json::json!({
                "summary": {"requested": 2, "resolved": 2, "unresolved": 0},
                "resolved_drs_object_access_urls": [
                    line(&pairs[0].0, &pairs[0].1, "file:///etc/passwd"),
                    {"drs_object_id": pairs[1].0, "drs_access_id": pairs[1].1,
                     "url": "https://store.example/b", "headers": ["Range: bytes=0-1"]},
                ],
            }),
        )
    })
    .await;
    let urls = client(&server)
        .bulk_access(&[wanted("a", "s3"), wanted("b", "s3")])
        .await;
    assert!(urls.is_empty(), "{:?}", urls.keys());
}

#[tokio::test]
async fn a_server_without_bulk_access_is_remembered_and_not_asked_so_again() {
    for answer in [404, 405, 501, 200] {
        let server = TestServer::start(move |seen, _| match (seen.path.as_str(), answer) {
            (BULK, 200) => Reply {
                status: 200,
                headers: vec![("content-type", "text/html".into())],
                body: "<html>not an API</html>".into(),
            },
            (BULK, code) => status(code),
            _ => status(404),
        })
        .await;
        let drs = client(&server);
        let asked = [wanted("a", "s3"), wanted("b", "s3")];
        assert!(drs.bulk_access(&asked).await.is_empty());
        assert!(drs.bulk_access(&asked).await.is_empty());
        assert_eq!(server.count("POST", BULK), 1, "answer {answer}");
        assert!(drs.lacks_bulk_access(&server.root.join(API).unwrap()));
    }
}

#[tokio::test]
async fn a_failed_bulk_request_is_not_taken_for_a_server_without_it() {
    let server = TestServer::start(|seen, _| match seen.path.as_str() {
        BULK => status(400),
        _ => status(404),
    })
    .await;
    let drs = client(&server);
    let asked = [wanted("a", "s3"), wanted("b", "s3")];
    assert!(drs.bulk_access(&asked).await.is_empty());
    assert!(drs.bulk_access(&asked).await.is_empty());
    assert_eq!(server.count("POST", BULK), 2);
}

#[tokio::test]
async fn more_than_a_hundred_go_in_requests_of_a_hundred() {
    let server = TestServer::start(signing(Vec::new())).await;
    let asked: Vec<AccessWanted> = (0..250).map(|i| wanted(&format!("o{i}"), "s3")).collect();
    let urls = client(&server).bulk_access(&asked).await;
    assert_eq!(urls.len(), 250);
    let sizes: Vec<usize> = server
        .seen()
        .iter()
        .filter(|s| s.path == BULK)
        .map(|s| asked_pairs(s).len())
        .collect();
    assert_eq!(sizes, vec![100, 100, 50]);
}

#[tokio::test]
async fn an_object_left_unresolved_gets_its_url_by_its_own_access_request() {
    let server = TestServer::start(|seen, _| {
        if seen.path == BULK {
            return reply(
                200,
                serde_json::json!({
                    "summary": {"requested": 2, "resolved": 1, "unresolved": 1},
                    "unresolved_drs_objects": [{"error_code": 500, "object_ids": ["dg.TEST/b"]}],
                    "resolved_drs_object_access_urls": [
                        line("dg.TEST/a", "s3", "https://store.example/a?sig=1"),
                    ],
                }),
            );
        }
        match seen.path.as_str() {
            p if p.ends_with("/access/s3") => reply(
                200,
                serde_json::json!({"url": "https://store.example/b?sig=2"}),
            ),
            p if p.starts_with(&format!("{API}/objects/")) => reply(
                200,
                serde_json::json!({
                    "id": "dg.TEST/b", "size": 3, "checksums": [],
                    "access_methods": [{"type": "https", "access_id": "s3"}],
                }),
            ),
            _ => status(404),
        }
    })
    .await;
    let drs = client(&server);
    let urls = drs
        .bulk_access(&[wanted("a", "s3"), wanted("b", "s3")])
        .await;
    assert_eq!(urls.len(), 1);
    let uri = DrsUri::parse("drs://dg.TEST:b").unwrap();
    let object = drs.object(&uri).await.unwrap();
    let own = drs.access_url(&uri, &object).await.unwrap();
    assert_eq!(own.url.expose(), "https://store.example/b?sig=2");
    assert_eq!(server.count("POST", BULK), 1);
}
