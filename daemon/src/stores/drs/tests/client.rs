//! Objects one at a time and in bulk, access URLs, 202s.

use std::time::{Duration, Instant};

use super::{object, quick, reply, status, Reply, Seen, TestServer};
use crate::stores::drs::{DrsAuth, DrsClient, DrsError, DrsUri};
use crate::stores::Permanence;

const API: &str = "/ga4gh/drs/v1";

fn client(server: &TestServer) -> DrsClient {
    DrsClient::new(&quick(), server.servers("dg.TEST"), DrsAuth::none()).unwrap()
}

fn uris(texts: &[&str]) -> Vec<DrsUri> {
    texts.iter().map(|t| DrsUri::parse(t).unwrap()).collect()
}

/// The id of the object at `/objects/{id}`, decoded.
fn asked_id(seen: &Seen) -> Option<String> {
    let id = seen.path.strip_prefix(&format!("{API}/objects/"))?;
    Some(
        percent_encoding::percent_decode_str(id)
            .decode_utf8()
            .ok()?
            .into_owned(),
    )
}

#[tokio::test]
async fn an_object_is_asked_by_its_id_as_one_encoded_segment() {
    let server = TestServer::start(|seen, _| match asked_id(seen) {
        Some(id) => reply(200, object(&id, 7)),
        None => status(404),
    })
    .await;
    let uri = DrsUri::parse("drs://dg.TEST:a/b?c").unwrap();
    let got = client(&server).object(&uri).await.unwrap();
    assert_eq!((got.id.as_str(), got.size), ("dg.TEST/a/b?c", 7));
    assert_eq!(
        server.seen()[0].path,
        format!("{API}/objects/dg.TEST%2Fa%2Fb%3Fc")
    );
}

#[tokio::test]
async fn a_404_is_not_found_naming_the_uri_and_asked_once() {
    let server = TestServer::start(|_, _| status(404)).await;
    let uri = DrsUri::parse("drs://dg.TEST:gone").unwrap();
    let err = client(&server).object(&uri).await.unwrap_err();
    assert!(matches!(err, DrsError::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("drs://dg.TEST:gone"), "{err}");
    assert_eq!(err.permanence(), Permanence::Permanent);
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn an_answer_about_another_object_is_refused() {
    let server = TestServer::start(|_, _| reply(200, object("someone-else", 1))).await;
    let uri = DrsUri::parse("drs://dg.TEST:mine").unwrap();
    let err = client(&server).object(&uri).await.unwrap_err().to_string();
    assert!(
        err.contains("someone-else") && err.contains("does not fit"),
        "{err}"
    );
}

#[tokio::test]
async fn a_503_is_asked_again_and_then_answered() {
    let server = TestServer::start(|seen, all| match all.len() {
        1 => status(503),
        _ => reply(200, object(&asked_id(seen).unwrap(), 1)),
    })
    .await;
    let uri = DrsUri::parse("drs://dg.TEST:u1").unwrap();
    client(&server).object(&uri).await.unwrap();
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn a_202_is_waited_for_then_the_object_is_answered() {
    let server = TestServer::start(|seen, all| match all.len() {
        1 => {
            let mut r = status(202);
            r.headers.push(("retry-after", "0".into()));
            r
        }
        _ => reply(200, object(&asked_id(seen).unwrap(), 3)),
    })
    .await;
    let uri = DrsUri::parse("drs://dg.TEST:staged").unwrap();
    let got = client(&server).object(&uri).await.unwrap();
    assert_eq!(got.size, 3);
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn a_202_forever_ends_as_still_pending_within_the_bound() {
    let server = TestServer::start(|_, _| {
        let mut r = status(202);
        r.headers.push(("retry-after", "1".into()));
        r
    })
    .await;
    let client = client(&server).with_pending_bound(Duration::from_millis(300));
    let uri = DrsUri::parse("drs://dg.TEST:tape").unwrap();
    let began = Instant::now();
    let err = client.object(&uri).await.unwrap_err();
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "{:?}",
        began.elapsed()
    );
    let DrsError::StillPending { uri: named, waited } = &err else {
        panic!("{err}");
    };
    assert_eq!(named, "drs://dg.TEST:tape");
    assert_eq!(*waited, Duration::from_millis(300));
    assert_eq!(err.permanence(), Permanence::Transient);
}

/// A bulk server declaring `max` ids a batch: it answers those it knows
/// (every id but `missing-*`), lists the others unresolved, and adds an
/// object nobody asked for.
fn bulk_server(max: u64) -> impl Fn(&Seen, &[Seen]) -> Reply {
    move |seen, _| match (seen.method.as_str(), seen.path.as_str()) {
        ("GET", p) if p == format!("{API}/service-info") => reply(
            200,
            serde_json::json!({"type": {"artifact": "drs"}, "drs": {"maxBulkRequestLength": max}}),
        ),
        ("POST", p) if p == format!("{API}/objects") => {
            let ids: Vec<String> =
                serde_json::from_value(seen.json()["bulk_object_ids"].clone()).unwrap();
            if ids.len() as u64 > max {
                return status(413);
            }
            let (missing, found): (Vec<_>, Vec<_>) =
                ids.iter().partition(|id| id.contains("missing"));
            let mut resolved: Vec<_> = found.iter().map(|id| object(id, id.len() as u64)).collect();
            resolved.push(object("dg.TEST/not-asked", 1));
            reply(
                200,
                serde_json::json!({
                    "summary": {"requested": ids.len()},
                    "unresolved_drs_objects": [{"error_code": 404, "object_ids": missing}],
                    "resolved_drs_object": resolved,
                }),
            )
        }
        _ => status(404),
    }
}

fn posted_batches(server: &TestServer) -> Vec<usize> {
    server
        .seen()
        .iter()
        .filter(|s| s.method == "POST")
        .map(|s| s.json()["bulk_object_ids"].as_array().unwrap().len())
        .collect()
}

#[tokio::test]
async fn bulk_lookups_go_in_batches_no_larger_than_the_server_declares() {
    let server = TestServer::start(bulk_server(2)).await;
    let asked = uris(&[
        "drs://dg.TEST:a",
        "drs://dg.TEST:missing-1",
        "drs://dg.TEST:bb",
        "drs://dg.TEST:a",
        "drs://dg.TEST:ccc",
    ]);
    let got = client(&server).objects(&asked).await;
    assert_eq!(got.len(), 5);
    assert_eq!(got[0].as_ref().unwrap().id, "dg.TEST/a");
    assert!(
        matches!(got[1], Err(DrsError::NotFound { .. })),
        "{:?}",
        got[1]
    );
    assert_eq!(got[2].as_ref().unwrap().id, "dg.TEST/bb");
    assert_eq!(
        got[3].as_ref().unwrap().id,
        "dg.TEST/a",
        "a URI given twice"
    );
    assert_eq!(got[4].as_ref().unwrap().id, "dg.TEST/ccc");
    assert_eq!(
        posted_batches(&server),
        vec![2, 2],
        "each distinct URI once"
    );
    assert_eq!(server.count("GET", &format!("{API}/service-info")), 1);
}

#[tokio::test]
async fn a_uri_the_bulk_answer_does_not_mention_is_an_error_for_it_alone() {
    let server = TestServer::start(|seen, _| match seen.method.as_str() {
        "POST" => reply(
            200,
            serde_json::json!({"resolved_drs_object": [object("dg.TEST/a", 1)]}),
        ),
        _ => status(404),
    })
    .await;
    let got = client(&server)
        .objects(&uris(&["drs://dg.TEST:a", "drs://dg.TEST:b"]))
        .await;
    assert_eq!(got[0].as_ref().unwrap().id, "dg.TEST/a");
    let err = got[1].as_ref().unwrap_err().to_string();
    assert!(
        err.contains("drs://dg.TEST:b") && err.contains("neither"),
        "{err}"
    );
}

#[tokio::test]
async fn a_413_splits_the_batch_in_halves_and_later_batches_stay_small() {
    let server = TestServer::start(|seen, _| {
        match seen.method.as_str() {
            "GET" => status(404), // no service-info: batches of the guessed size
            _ => {
                let ids: Vec<String> =
                    serde_json::from_value(seen.json()["bulk_object_ids"].clone()).unwrap();
                if ids.len() > 2 {
                    return status(413);
                }
                let resolved: Vec<_> = ids.iter().map(|id| object(id, 1)).collect();
                reply(200, serde_json::json!({"resolved_drs_object": resolved}))
            }
        }
    })
    .await;
    let client = client(&server);
    let asked = uris(&[
        "drs://dg.TEST:1",
        "drs://dg.TEST:2",
        "drs://dg.TEST:3",
        "drs://dg.TEST:4",
        "drs://dg.TEST:5",
    ]);
    let got = client.objects(&asked).await;
    assert!(got.iter().all(Result::is_ok), "{got:?}");
    // Batches of one wave go at once: their order of arrival is free.
    let sorted = |mut v: Vec<usize>| {
        v.sort_unstable();
        v
    };
    let first = posted_batches(&server);
    assert_eq!(first[0], 5, "the guessed size first: {first:?}");
    assert_eq!(sorted(first[1..].to_vec()), vec![1, 2, 2, 3]);
    client.objects(&asked[..3]).await;
    assert_eq!(
        sorted(posted_batches(&server)[5..].to_vec()),
        [1, 2],
        "no batch past the size that passed"
    );
}

#[tokio::test]
async fn a_server_without_bulk_gets_concurrent_gets_and_is_not_asked_in_bulk_again() {
    let server = TestServer::start(|seen, _| match seen.method.as_str() {
        "POST" => status(405),
        _ => match asked_id(seen) {
            Some(id) => reply(200, object(&id, 2)),
            None => status(404),
        },
    })
    .await;
    let client = client(&server);
    let asked = uris(&["drs://dg.TEST:x", "drs://dg.TEST:y", "drs://dg.TEST:z"]);
    let got = client.objects(&asked).await;
    let ids: Vec<&str> = got
        .iter()
        .map(|g| g.as_ref().unwrap().id.as_str())
        .collect();
    assert_eq!(ids, ["dg.TEST/x", "dg.TEST/y", "dg.TEST/z"]);
    client.objects(&asked).await;
    assert_eq!(posted_batches(&server), vec![3], "bulk asked once");
    assert_eq!(
        server
            .seen()
            .iter()
            .filter(|s| asked_id(s).is_some())
            .count(),
        6
    );
}

#[tokio::test]
async fn a_bulk_server_answering_404_has_none_of_them_and_keeps_its_bulk() {
    let server = TestServer::start(|seen, _| match (seen.method.as_str(), asked_id(seen)) {
        ("GET", None) => reply(200, serde_json::json!({"maxBulkRequestLength": 10})),
        _ => status(404),
    })
    .await;
    let client = client(&server);
    let asked = uris(&["drs://dg.TEST:x", "drs://dg.TEST:y"]);
    for _ in 0..2 {
        let got = client.objects(&asked).await;
        assert!(
            got.iter()
                .all(|g| matches!(g, Err(DrsError::NotFound { .. }))),
            "{got:?}"
        );
    }
    assert_eq!(posted_batches(&server), vec![2, 2]);
}

#[tokio::test]
async fn uris_of_an_unknown_prefix_fail_alone_and_others_are_answered() {
    let server = TestServer::start(bulk_server(10)).await;
    let got = client(&server)
        .objects(&uris(&["drs://dg.NOPE:a", "drs://dg.TEST:b"]))
        .await;
    let err = got[0].as_ref().unwrap_err().to_string();
    assert!(
        err.contains("dg.NOPE") && err.contains("DRSD_DRS_SERVERS"),
        "{err}"
    );
    assert_eq!(got[1].as_ref().unwrap().id, "dg.TEST/b");
}

#[tokio::test]
async fn an_access_id_is_exchanged_for_a_url_and_a_404_moves_to_the_next_method() {
    let server = TestServer::start(|seen, _| {
        let path = seen.path.as_str();
        if path.ends_with("/access/first") {
            status(404)
        } else if path == format!("{API}/objects/dg.TEST%2Fu1/access/second") {
            reply(
                200,
                serde_json::json!({
                    "url": "https://store.example/k?X-Amz-Signature=s3cr3t",
                    "headers": ["Authorization: Bearer t0ken"]
                }),
            )
        } else {
            status(404)
        }
    })
    .await;
    let uri = DrsUri::parse("drs://dg.TEST:u1").unwrap();
    let mut obj: crate::stores::drs::DrsObject =
        serde_json::from_value(object("dg.TEST/u1", 1)).unwrap();
    obj.access_methods = serde_json::from_value(serde_json::json!([
        {"type": "gs", "access_url": {"url": "gs://b/k"}},
        {"type": "https", "access_id": "first"},
        {"type": "S3", "access_id": "second"},
    ]))
    .unwrap();
    let got = client(&server).access_url(&uri, &obj).await.unwrap();
    assert_eq!(
        got.url.expose(),
        "https://store.example/k?X-Amz-Signature=s3cr3t"
    );
    assert_eq!(
        got.headers,
        vec![("authorization".into(), "Bearer t0ken".into())]
    );
    let shown = format!("{got:?}");
    assert!(
        !shown.contains("s3cr3t") && !shown.contains("t0ken"),
        "{shown}"
    );
}

#[tokio::test]
async fn an_object_with_no_usable_access_method_names_what_it_offers() {
    let server = TestServer::start(|_, _| status(404)).await;
    let uri = DrsUri::parse("drs://dg.TEST:u1").unwrap();
    let mut obj: crate::stores::drs::DrsObject =
        serde_json::from_value(object("dg.TEST/u1", 1)).unwrap();
    obj.access_methods = serde_json::from_value(serde_json::json!([
        {"type": "gs", "access_url": {"url": "gs://b/k"}},
        {"type": "https", "access_id": "gone"},
    ]))
    .unwrap();
    let err = client(&server)
        .access_url(&uri, &obj)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("drs://dg.TEST:u1") && err.contains("\"gs\", \"https\""),
        "{err}"
    );
}

#[tokio::test]
async fn a_hostname_uri_on_a_mapped_host_reaches_its_server() {
    let server = TestServer::start(|seen, _| match asked_id(seen) {
        Some(id) => reply(200, object(&id, 4)),
        None => status(404),
    })
    .await;
    let servers =
        crate::stores::drs::DrsServers::parse(&format!("drs.example.org={}", server.root)).unwrap();
    let client = DrsClient::new(&quick(), servers, DrsAuth::none()).unwrap();
    let uri = DrsUri::parse("drs://drs.example.org/..%2Fadmin").unwrap();
    assert_eq!(client.object(&uri).await.unwrap().id, "../admin");
    assert_eq!(server.seen()[0].path, format!("{API}/objects/..%2Fadmin"));
}

/// A server that behaves as Gen3 Indexd 6.3 where it trips clients: records
/// `dg.TEST/u1` and, from an older commons, `u2` (no prefix); `u3`, whose
/// newest version is `dg.TEST/u3v2` (its baseid `u3`); and the blank record
/// `dg.TEST/blank`. Single GETs take an id with or without the prefix, or
/// a baseid; the bulk lookup matches exact dids only and lists the rest
/// under 404, the blank record among the resolved.
fn indexd_like(seen: &Seen, _: &[Seen]) -> Reply {
    let record = |did: &str| match did {
        "dg.TEST/u1" | "u2" | "dg.TEST/u3v2" => Some(object(did, did.len() as u64)),
        "dg.TEST/blank" => Some(serde_json::json!({
            "id": did, "self_uri": "drs://dg.TEST:blank", "size": null, "form": null,
            "checksums": [], "access_methods": [], "name": "pending.bam"
        })),
        _ => None,
    };
    let lenient = |id: &str| {
        let id = if id == "u3" || id == "dg.TEST/u3" {
            "dg.TEST/u3v2"
        } else {
            id
        };
        record(id).or_else(|| match id.strip_prefix("dg.TEST/") {
            Some(bare) => record(bare),
            None => record(&format!("dg.TEST/{id}")),
        })
    };
    match (seen.method.as_str(), seen.path.as_str()) {
        ("GET", p) if p == format!("{API}/service-info") => reply(
            200,
            serde_json::json!({"type": {"artifact": "drs"}, "maxBulkRequestLength": 100}),
        ),
        ("POST", p) if p == format!("{API}/objects") => {
            let ids: Vec<String> =
                serde_json::from_value(seen.json()["bulk_object_ids"].clone()).unwrap();
            let (found, missing): (Vec<_>, Vec<_>) =
                ids.iter().partition(|id| record(id).is_some());
            let resolved: Vec<_> = found.iter().filter_map(|id| record(id)).collect();
            reply(
                200,
                serde_json::json!({
                    "summary": {"requested": ids.len()},
                    "unresolved_drs_objects": [{"error_code": 404, "object_ids": missing}],
                    "resolved_drs_objects": resolved,
                }),
            )
        }
        ("GET", "/index/dg.TEST/u3v2") => reply(
            200,
            serde_json::json!({"did": "dg.TEST/u3v2", "baseid": "u3", "size": 12}),
        ),
        ("GET", "/index/dg.TEST/u1") => reply(
            200,
            serde_json::json!({"did": "dg.TEST/u1", "baseid": "other", "size": 10}),
        ),
        _ => match asked_id(seen).and_then(|id| lenient(&id)) {
            Some(found) => reply(200, found),
            None => reply(
                404,
                serde_json::json!({"msg": "no record found", "status_code": 404}),
            ),
        },
    }
}

#[tokio::test]
async fn ids_the_bulk_lookup_leaves_unresolved_are_asked_once_more_one_by_one() {
    let server = TestServer::start(indexd_like).await;
    let authority = server.authority();
    let asked = uris(&[
        // A bare uuid under a host: the record is `dg.TEST/u1`.
        &format!("drs://{authority}/u1"),
        // Indexd's own self_uri of a did without prefix.
        "drs://dg.TEST:u2",
        "drs://dg.TEST:missing",
    ]);
    let servers = crate::stores::drs::DrsServers::parse(&format!(
        "dg.TEST={root},{authority}={root}",
        root = server.root
    ))
    .unwrap();
    let client = DrsClient::new(&quick(), servers, DrsAuth::none()).unwrap();
    let got = client.objects(&asked).await;
    assert_eq!(got[0].as_ref().unwrap().id, "dg.TEST/u1");
    assert_eq!(got[1].as_ref().unwrap().id, "u2");
    assert!(
        matches!(got[2], Err(DrsError::NotFound { .. })),
        "{:?}",
        got[2]
    );
    assert_eq!(posted_batches(&server), vec![3], "one server, one batch");
    let singles: Vec<String> = server
        .seen()
        .iter()
        .filter(|s| s.method == "GET")
        .filter_map(asked_id)
        .collect();
    assert_eq!(
        singles.len(),
        3,
        "each unresolved id asked once: {singles:?}"
    );
}

#[tokio::test]
async fn a_blank_record_is_refused_by_name_and_the_rest_of_its_batch_goes_on() {
    let server = TestServer::start(indexd_like).await;
    let asked = uris(&[
        "drs://dg.TEST:u1",
        "drs://dg.TEST:blank",
        "drs://dg.TEST:u3v2",
    ]);
    let got = client(&server).objects(&asked).await;
    assert_eq!(got[0].as_ref().unwrap().id, "dg.TEST/u1");
    assert_eq!(got[2].as_ref().unwrap().id, "dg.TEST/u3v2");
    let err = got[1].as_ref().unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, DrsError::Unusable { .. })
            && text.contains("drs://dg.TEST:blank")
            && text.contains("upload is not finished"),
        "{text}"
    );
    assert_eq!(posted_batches(&server), vec![3], "one batch, no single GET");
    // Asked alone, it is refused the same way.
    let err = client(&server).object(&asked[1]).await.unwrap_err();
    assert!(err.to_string().contains("upload is not finished"), "{err}");
}

#[tokio::test]
async fn a_baseid_is_answered_with_its_newest_version_when_indexd_says_it_is_one() {
    let server = TestServer::start(indexd_like).await;
    let got = client(&server)
        .object(&DrsUri::parse("drs://dg.TEST:u3").unwrap())
        .await;
    assert_eq!(got.unwrap().id, "dg.TEST/u3v2");
    assert_eq!(server.count("GET", "/index/dg.TEST/u3v2"), 1);
    // A record whose baseid is another id is still about another object.
    let server = TestServer::start(|seen, _| match seen.path.as_str() {
        "/index/dg.TEST/u1" => reply(
            200,
            serde_json::json!({"did": "dg.TEST/u1", "baseid": "other"}),
        ),
        _ => reply(200, object("dg.TEST/u1", 1)),
    })
    .await;
    let err = client(&server)
        .object(&DrsUri::parse("drs://dg.TEST:mine").unwrap())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("\"dg.TEST/u1\""), "{err}");
}

#[tokio::test]
async fn a_refusal_quotes_the_servers_error_body_and_never_the_password_sent() {
    let dir = tempfile::tempdir().unwrap();
    let netrc = dir.path().join("netrc");
    std::fs::write(
        &netrc,
        "machine 127.0.0.1 login me password hunter2-s3cr3t\n",
    )
    .unwrap();
    let server = TestServer::start(|_, _| {
        reply(
            403,
            serde_json::json!({"msg": "username / password mismatch for me:hunter2-s3cr3t", "status_code": 403}),
        )
    })
    .await;
    let auth = DrsAuth::none().netrc_file(crate::stores::drs::NetrcFile::at(netrc));
    let client = DrsClient::new(&quick(), server.servers("dg.TEST"), auth).unwrap();
    let err = client
        .object(&DrsUri::parse("drs://dg.TEST:u1").unwrap())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("HTTP 403")
            && text.contains("the server says \"username / password mismatch"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}

/// An answer with Fence's HTML error page for `status`.
fn fence_error(status: u16, reason: &str, message: Option<&str>) -> Reply {
    Reply {
        status,
        headers: vec![("content-type", "text/html; charset=utf-8".into())],
        body: crate::stores::drs::error_page::fence_page(status, reason, message),
    }
}

/// Fence's HTML pages are read for their message, and the error names the
/// URL asked (its path; never its query) rather than the server's root,
/// with what to do next.
#[tokio::test]
async fn a_fence_error_page_is_quoted_and_the_error_names_the_url_asked() {
    let server = TestServer::start(|seen, _| match seen.path.as_str() {
        "/ga4gh/drs/v1/objects/dg.TEST%2Fdenied" => fence_error(
            403,
            "Forbidden",
            Some("You don&#39;t have access permission on this file"),
        ),
        _ => fence_error(500, "Internal Server Error", None),
    })
    .await;
    let client = client(&server);
    let denied = client
        .object(&DrsUri::parse("drs://dg.TEST:denied").unwrap())
        .await
        .unwrap_err()
        .to_string();
    let url = format!("{}ga4gh/drs/v1/objects/dg.TEST%2Fdenied", server.root);
    for part in [
        format!("{url} refused access (HTTP 403) with no credentials"),
        "the server says \"You don't have access permission on this file\"".into(),
        "(error id 6f1c2a7e-93b4-4d0a-8e5f-2b9c1d3e4f50)".into(),
        "DRSD_GEN3_CREDENTIALS".into(),
    ] {
        assert!(denied.contains(&part), "{part}: {denied}");
    }
    let failed = client
        .object(&DrsUri::parse("drs://dg.TEST:u1").unwrap())
        .await
        .unwrap_err()
        .to_string();
    for part in [
        format!(
            "HTTP 500 from {}ga4gh/drs/v1/objects/dg.TEST%2Fu1",
            server.root
        ),
        "the server says \"Internal Server Error\"".into(),
        "try again later".into(),
    ] {
        assert!(failed.contains(&part), "{part}: {failed}");
    }
    assert!(!failed.contains("<"), "no markup: {failed}");
}
