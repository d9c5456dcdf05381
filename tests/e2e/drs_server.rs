//! The DRS + Indexd test server (`drsd_e2e::drs_server`) seen from a plain
//! HTTP client: the behaviour other tests rely on it for (limits, 202s,
//! auth, Indexd, signed URLs, ranges, counts) holds. No Ceph, no daemon.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use drsd_e2e::drs_server::{
    AccessSpec, Auth, Counts, DrsServer, Endpoint, NewRecord, ObjectSpec, Times,
};
use reqwest::blocking::{Client, Response};
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

fn client() -> Client {
    Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client")
}

/// `GET {drs_url}/{rel}`.
fn drs_get(server: &DrsServer, rel: &str) -> Response {
    client()
        .get(format!("{}/{rel}", server.drs_url()))
        .send()
        .expect("the DRS server answers")
}

fn bulk(server: &DrsServer, ids: &[String]) -> Response {
    client()
        .post(format!("{}/objects", server.drs_url()))
        .json(&json!({ "bulk_object_ids": ids }))
        .send()
        .expect("the DRS server answers")
}

fn json_of(response: Response) -> Value {
    response.json().expect("a JSON body")
}

fn bytes(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn server_with(ids: &[&str]) -> DrsServer {
    let server = DrsServer::start();
    for (n, id) in ids.iter().enumerate() {
        server.add_object(ObjectSpec::blob(id, bytes(1000 + n)));
    }
    server
}

#[test]
fn a_bulk_request_past_the_declared_limit_is_answered_as_indexd_does_never_413() {
    let server = server_with(&["a"]);
    server.set_bulk_limit(Some(3));
    let ids: Vec<String> = (0..150).map(|i| format!("id-{i}")).collect();
    let response = bulk(&server, &ids);
    assert_eq!(response.status(), StatusCode::OK);
    let body = json_of(response);
    assert_eq!(body["summary"]["requested"], 150, "{}", body["summary"]);
    let info = json_of(drs_get(&server, "service-info"));
    assert_eq!(info["drs"]["maxBulkRequestLength"], 3, "{info}");
}

#[test]
fn a_bulk_request_resolves_the_ids_it_finds_and_lists_the_others_as_404() {
    let server = server_with(&["a", "b"]);
    let ids = ["a", "nope", "b"].map(String::from);
    let response = bulk(&server, &ids);
    assert_eq!(response.status(), StatusCode::OK);
    let body = json_of(response);
    assert_eq!(
        body["summary"],
        json!({"requested": 3, "resolved": 2, "unresolved": 1})
    );
    assert_eq!(
        body["unresolved_drs_objects"],
        json!([{"error_code": 404, "object_ids": ["nope"]}])
    );
    let resolved: Vec<&str> = body["resolved_drs_objects"]
        .as_array()
        .expect("resolved_drs_objects (Indexd's key) is a list")
        .iter()
        .filter_map(|o| o["id"].as_str())
        .collect();
    assert_eq!(resolved, ["a", "b"]);
}

#[test]
fn bulk_requests_switched_off_answer_404_and_service_info_names_no_limit() {
    let server = server_with(&["a"]);
    server.set_bulk_limit(None);
    assert_eq!(bulk(&server, &["a".into()]).status(), StatusCode::NOT_FOUND);
    let info = json_of(drs_get(&server, "service-info"));
    assert!(info.get("drs").is_none(), "{info}");
    assert_eq!(info["type"]["version"], "1.2.0");
}

#[test]
fn a_deferred_object_answers_202_with_retry_after_then_200() {
    let server = server_with(&["slow"]);
    server.defer(Endpoint::Object, "slow", Times::Next(2), 7);
    for _ in 0..2 {
        let response = drs_get(&server, "objects/slow");
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        assert_eq!(response.headers()["retry-after"], "7");
    }
    assert_eq!(drs_get(&server, "objects/slow").status(), StatusCode::OK);
    assert_eq!(server.counts().objects_get, 3);
}

#[test]
fn a_deferral_forever_holds_bulk_requests_naming_the_id() {
    let server = server_with(&["a", "held"]);
    server.defer(Endpoint::Bulk, "held", Times::Forever, 1);
    for _ in 0..3 {
        let response = bulk(&server, &["a".into(), "held".into()]);
        assert_eq!(response.status(), StatusCode::ACCEPTED);
    }
    assert_eq!(bulk(&server, &["a".into()]).status(), StatusCode::OK);
}

#[test]
fn an_unknown_id_answers_404_with_the_drs_error_body() {
    let server = server_with(&[]);
    let response = drs_get(&server, "objects/missing");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body = json_of(response);
    assert_eq!(body["status_code"], 404);
    assert!(
        body["msg"].as_str().is_some_and(|m| m.contains("missing")),
        "{body}"
    );
}

#[test]
fn basic_auth_answers_401_without_credentials_403_with_wrong_ones_and_200_with_right_ones() {
    let server = server_with(&["a"]);
    server.set_auth(Auth::Basic {
        user: "ann".into(),
        password: "s3cret".into(),
    });
    let url = format!("{}/objects/a", server.drs_url());
    let none = client().get(&url).send().unwrap();
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    assert!(none.headers()[WWW_AUTHENTICATE]
        .to_str()
        .unwrap()
        .starts_with("Basic"));
    let wrong = client()
        .get(&url)
        .basic_auth("ann", Some("guess"))
        .send()
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    let right = client()
        .get(&url)
        .basic_auth("ann", Some("s3cret"))
        .send()
        .unwrap();
    assert_eq!(right.status(), StatusCode::OK);
}

#[test]
fn options_names_the_auth_an_object_takes_without_asking_for_it() {
    let server = server_with(&["a"]);
    server.set_auth(Auth::Bearer);
    let url = format!("{}/objects/a", server.drs_url());
    let response = client().request(Method::OPTIONS, &url).send().unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = json_of(response);
    assert_eq!(body["supported_types"], json!(["BearerAuth"]), "{body}");
    assert_eq!(server.counts().objects_options, 1);
}

fn register(server: &DrsServer, login: Option<(&str, &str)>, body: &Value) -> Response {
    let request = client()
        .post(format!("{}/index/", server.base_url()))
        .json(body);
    let request = match login {
        Some((user, password)) => request.basic_auth(user, Some(password)),
        None => request,
    };
    request.send().expect("Indexd answers")
}

fn record_body(content: &[u8]) -> Value {
    json!({
        "form": "object",
        "size": content.len(),
        "hashes": {
            "md5": hex::encode(<md5::Md5 as Digest>::digest(content)),
            "sha256": hex::encode(Sha256::digest(content)),
            "etag": format!("{}-2", hex::encode(<md5::Md5 as Digest>::digest(b"parts"))),
        },
        "urls": ["s3://bucket/reads.cram"],
        "file_name": "reads.cram",
        "authz": ["/programs/test"],
    })
}

#[test]
fn an_indexd_record_registered_is_found_by_hash_and_read_by_its_did() {
    let server = DrsServer::start();
    let content = bytes(5000);
    let (user, password) = server.indexd_login();
    let created = register(&server, Some((&user, &password)), &record_body(&content));
    assert_eq!(created.status(), StatusCode::OK);
    let created = json_of(created);
    let did = created["did"].as_str().expect("a did").to_string();
    assert!(did.starts_with("dg.TEST/"), "{did}");

    let sha256 = hex::encode(Sha256::digest(&content));
    let found = client()
        .get(format!(
            "{}/index?hash=sha256:{sha256}&size={}",
            server.base_url(),
            content.len()
        ))
        .send()
        .unwrap();
    let found = json_of(found);
    let records = found["records"].as_array().expect("records");
    assert_eq!(records.len(), 1, "{found}");
    assert_eq!(records[0]["did"], did.as_str());

    let read = client()
        .get(format!("{}/index/{did}", server.base_url()))
        .send()
        .unwrap();
    assert_eq!(read.status(), StatusCode::OK);
    let read = json_of(read);
    assert_eq!(read["hashes"]["sha256"], sha256.as_str());
    assert_eq!(read["rev"], created["rev"]);

    let other = client()
        .get(format!(
            "{}/index?hash=sha256:{}",
            server.base_url(),
            "0".repeat(64)
        ))
        .send()
        .unwrap();
    assert_eq!(json_of(other)["records"], json!([]));
    let counts = server.counts();
    assert_eq!(
        (counts.index_post, counts.index_by_hash, counts.index_get),
        (1, 2, 1)
    );
}

#[test]
fn indexd_refuses_writes_without_its_credentials_and_reads_of_missing_dids() {
    let server = DrsServer::start();
    let body = record_body(b"x");
    let refused = register(&server, None, &body);
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let said = json_of(refused);
    assert!(
        said["error"]
            .as_str()
            .unwrap()
            .starts_with("Arborist is not configured"),
        "Indexd's body: {said}"
    );
    let refused = register(&server, Some(("indexd", "wrong")), &body);
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        json_of(refused),
        json!({"error": "username / password mismatch"})
    );
    let missing = client()
        .get(format!(
            "{}/index/dg.TEST/00000000-0000-4000-8000-000000000000",
            server.base_url()
        ))
        .send()
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
}

#[test]
fn indexd_refuses_a_chosen_did_that_does_not_end_in_a_uuid() {
    let server = DrsServer::start();
    let (user, password) = server.indexd_login();
    let mut body = record_body(b"x");
    body["did"] = json!("dg.TEST/not-a-uuid");
    let response = register(&server, Some((&user, &password)), &body);
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

#[test]
fn an_indexd_record_is_a_drs_object_with_indexd_checksum_names_whether_its_did_is_encoded_or_not() {
    let server = DrsServer::start();
    let did = "dg.TEST/6b0f9f4e-2d1c-4a8b-9e7f-0c1d2e3f4a5b";
    let mut record: NewRecord = serde_json::from_value(record_body(b"indexed")).unwrap();
    record.did = Some(did.into());
    assert_eq!(server.add_record(record).as_deref(), Ok(did));
    for path in [did.to_string(), did.replace('/', "%2F")] {
        let object = json_of(drs_get(&server, &format!("objects/{path}")));
        assert_eq!(object["id"], did, "{object}");
        assert_eq!(
            object["self_uri"],
            "drs://dg.TEST:6b0f9f4e-2d1c-4a8b-9e7f-0c1d2e3f4a5b"
        );
        let types: Vec<&str> = object["checksums"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(types, ["etag", "md5", "sha256"]);
        assert_eq!(
            object["access_methods"],
            json!([{"type": "s3", "access_url": {"url": "s3://bucket/reads.cram"}}])
        );
    }
}

/// Registers `content` under `did` (given whole, prefix or not).
fn record_with_did(server: &DrsServer, content: &[u8], did: &str) -> String {
    let mut record: NewRecord = serde_json::from_value(record_body(content)).unwrap();
    record.did = Some(did.into());
    server.add_record(record).unwrap()
}

#[test]
fn a_single_lookup_takes_a_did_with_or_without_its_prefix_and_bulk_the_exact_did_only() {
    let server = DrsServer::start();
    let uuid = "221c9b3f-2d1c-4a8b-9e7f-0c1d2e3f4a5b";
    let prefixed = record_with_did(&server, b"new", &format!("dg.TEST/{uuid}"));
    let bare_uuid = "3a4b5c6d-2d1c-4a8b-9e7f-0c1d2e3f4a5b";
    let bare = record_with_did(&server, b"old commons", bare_uuid);
    // One at a time: both ways, on DRS and on /index.
    for (asked, did) in [
        (uuid.to_string(), &prefixed),
        (prefixed.clone(), &prefixed),
        (bare_uuid.to_string(), &bare),
        (format!("dg.TEST/{bare_uuid}"), &bare),
    ] {
        let object = json_of(drs_get(&server, &format!("objects/{asked}")));
        assert_eq!(object["id"], did.as_str(), "{asked}: {object}");
        let record = client()
            .get(format!("{}/index/{asked}", server.base_url()))
            .send()
            .unwrap();
        assert_eq!(json_of(record)["did"], did.as_str(), "{asked}");
    }
    // An unprefixed did's self_uri is Indexd's compact form all the same.
    let object = json_of(drs_get(&server, &format!("objects/{bare_uuid}")));
    assert_eq!(object["self_uri"], format!("drs://dg.TEST:{bare_uuid}"));
    // In bulk: the exact did only.
    let asked = [
        uuid.to_string(),
        prefixed.clone(),
        format!("dg.TEST/{bare_uuid}"),
    ];
    let body = json_of(bulk(&server, &asked));
    let resolved: Vec<&str> = body["resolved_drs_objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["id"].as_str())
        .collect();
    assert_eq!(resolved, [prefixed.as_str()], "{body}");
    let mut unresolved = vec![uuid.to_string(), format!("dg.TEST/{bare_uuid}")];
    unresolved.sort();
    assert_eq!(
        body["unresolved_drs_objects"],
        json!([{"error_code": 404, "object_ids": unresolved}])
    );
}

#[test]
fn a_single_lookup_of_a_baseid_gives_the_newest_version() {
    let server = DrsServer::start();
    let (user, password) = server.indexd_login();
    let first = json_of(register(
        &server,
        Some((&user, &password)),
        &record_body(b"v1"),
    ));
    let did = first["did"].as_str().unwrap();
    let baseid = first["baseid"].as_str().unwrap();
    let newer = client()
        .post(format!("{}/index/{did}", server.base_url()))
        .basic_auth(&user, Some(&password))
        .json(&record_body(b"v2"))
        .send()
        .unwrap();
    let newer = json_of(newer);
    assert_eq!(newer["baseid"], baseid);
    let object = json_of(drs_get(&server, &format!("objects/{baseid}")));
    assert_eq!(object["id"], newer["did"], "{object}");
    let record = client()
        .get(format!("{}/index/{baseid}", server.base_url()))
        .send()
        .unwrap();
    let record = json_of(record);
    assert_eq!(record["did"], newer["did"], "{record}");
    assert_eq!(record["baseid"], baseid);
    assert_eq!(
        bulk(&server, &[baseid.to_string()])
            .json::<Value>()
            .unwrap()["summary"]["resolved"],
        0,
        "bulk: exact dids only"
    );
}

#[test]
fn a_blank_record_renders_with_null_size_and_form_and_empty_lists_in_either_lookup() {
    let server = DrsServer::start();
    let (user, password) = server.indexd_login();
    let made = client()
        .post(format!("{}/index/blank/", server.base_url()))
        .basic_auth(&user, Some(&password))
        .json(&json!({"uploader": "someone", "file_name": "pending.bam"}))
        .send()
        .unwrap();
    assert_eq!(made.status(), StatusCode::OK);
    let did = json_of(made)["did"].as_str().unwrap().to_string();
    assert!(did.starts_with("dg.TEST/"), "{did}");
    let object = json_of(drs_get(&server, &format!("objects/{did}")));
    for (key, value) in [
        ("size", json!(null)),
        ("form", json!(null)),
        ("checksums", json!([])),
        ("access_methods", json!([])),
        ("name", json!("pending.bam")),
    ] {
        assert_eq!(object[key], value, "{key}: {object}");
    }
    let body = json_of(bulk(&server, std::slice::from_ref(&did)));
    assert_eq!(
        body["resolved_drs_objects"][0]["size"],
        json!(null),
        "{body}"
    );
    let blank_of = server.add_blank_record("other.bam");
    assert_ne!(blank_of, did);
    let refused = client()
        .post(format!("{}/index/blank/", server.base_url()))
        .json(&json!({"uploader": "someone"}))
        .send()
        .unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
}

#[test]
fn indexd_set_down_answers_503_to_every_index_request() {
    let server = DrsServer::start();
    server.set_indexd_down(true);
    let (user, password) = server.indexd_login();
    assert_eq!(
        register(&server, Some((&user, &password)), &record_body(b"x")).status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    for rel in ["index?hash=md5:00", "index/dg.TEST/x"] {
        let response = client()
            .get(format!("{}/{rel}", server.base_url()))
            .send()
            .unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "{rel}");
    }
}

fn access_token(server: &DrsServer, api_key: &str) -> Response {
    client()
        .post(format!(
            "{}/user/credentials/api/access_token",
            server.base_url()
        ))
        .json(&json!({ "api_key": api_key, "key_id": "key-1" }))
        .send()
        .expect("the token endpoint answers")
}

fn get_with_token(server: &DrsServer, token: &str) -> StatusCode {
    client()
        .get(format!("{}/objects/a", server.drs_url()))
        .bearer_auth(token)
        .send()
        .expect("the DRS server answers")
        .status()
}

/// The `exp` claim of a JWT-shaped token.
fn exp_claim(token: &str) -> u64 {
    let payload = token.split('.').nth(1).expect("header.payload.sig");
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    claims["exp"].as_u64().expect("an exp claim")
}

#[test]
fn an_expired_token_is_refused_with_401_and_a_renewed_one_is_taken() {
    let server = server_with(&["a"]);
    server.set_auth(Auth::Bearer);
    server.set_api_key("key-1", "the-api-key");
    assert_eq!(
        access_token(&server, "not-the-key").status(),
        StatusCode::UNAUTHORIZED
    );

    server.set_token_ttl(Duration::from_secs(600));
    let token = json_of(access_token(&server, "the-api-key"))["access_token"]
        .as_str()
        .expect("an access token")
        .to_string();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!((now + 590..=now + 610).contains(&exp_claim(&token)));
    assert_eq!(get_with_token(&server, &token), StatusCode::OK);

    server.expire_tokens();
    assert_eq!(get_with_token(&server, &token), StatusCode::UNAUTHORIZED);
    let renewed = json_of(access_token(&server, "the-api-key"))["access_token"]
        .as_str()
        .expect("an access token")
        .to_string();
    assert_ne!(renewed, token);
    assert_eq!(get_with_token(&server, &renewed), StatusCode::OK);
    assert_eq!(server.counts().token, 3);
}

#[test]
fn a_revoked_token_is_refused_with_401_and_an_unknown_one_with_403() {
    let server = server_with(&["a"]);
    server.set_auth(Auth::Bearer);
    server.add_token("tok-1");
    assert_eq!(get_with_token(&server, "tok-1"), StatusCode::OK);
    server.revoke_token("tok-1");
    assert_eq!(get_with_token(&server, "tok-1"), StatusCode::UNAUTHORIZED);
    assert_eq!(get_with_token(&server, "tok-2"), StatusCode::FORBIDDEN);
}

/// The access URL of the object's first access method.
fn access_url(server: &DrsServer, id: &str) -> (String, Vec<String>) {
    let object = json_of(drs_get(server, &format!("objects/{id}")));
    let url = &object["access_methods"][0]["access_url"];
    let headers = url["headers"]
        .as_array()
        .map(|h| {
            h.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    (
        url["url"].as_str().expect("an access_url").to_string(),
        headers,
    )
}

#[test]
fn the_data_endpoint_serves_a_range_with_its_etag_and_counts_the_bytes_sent() {
    let content = bytes(200_000);
    let server = DrsServer::start();
    server.add_object(ObjectSpec::blob("reads", content.clone()));
    let (url, _) = access_url(&server, "reads");
    let head = client().head(&url).send().unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(
        head.headers()["content-length"],
        content.len().to_string().as_str()
    );
    let etag = head.headers()["etag"].clone();

    let part = client()
        .get(&url)
        .header("range", "bytes=100-70099")
        .header("if-match", etag.clone())
        .send()
        .unwrap();
    assert_eq!(part.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(part.headers()["content-range"], "bytes 100-70099/200000");
    assert_eq!(part.bytes().unwrap().as_ref(), &content[100..70100]);

    let stale = client()
        .get(&url)
        .header("if-match", "\"other\"")
        .send()
        .unwrap();
    assert_eq!(stale.status(), StatusCode::PRECONDITION_FAILED);
    let past = client()
        .get(&url)
        .header("range", "bytes=200000-")
        .send()
        .unwrap();
    assert_eq!(past.status(), StatusCode::RANGE_NOT_SATISFIABLE);

    let counts = server.counts();
    assert_eq!(
        (counts.data_head, counts.data_get, counts.data_bytes),
        (1, 3, 70_000)
    );
}

#[test]
fn a_served_object_with_an_access_header_wants_that_header() {
    let server = DrsServer::start();
    let mut spec = ObjectSpec::blob("guarded", bytes(300));
    spec.access = vec![AccessSpec::served_with("Authorization: Bearer data-token")];
    server.add_object(spec);
    let (url, headers) = access_url(&server, "guarded");
    assert_eq!(headers, ["Authorization: Bearer data-token"]);
    assert_eq!(
        client().get(&url).send().unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let wrong = client().get(&url).bearer_auth("other").send().unwrap();
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    let mut right = HeaderMap::new();
    right.insert(AUTHORIZATION, HeaderValue::from_static("Bearer data-token"));
    assert_eq!(
        client().get(&url).headers(right).send().unwrap().status(),
        StatusCode::OK
    );
}

/// Resolves `access_id` of `id` to its URL.
fn resolve(server: &DrsServer, id: &str, access_id: &str) -> String {
    let response = drs_get(server, &format!("objects/{id}/access/{access_id}"));
    assert_eq!(response.status(), StatusCode::OK);
    json_of(response)["url"]
        .as_str()
        .expect("a url")
        .to_string()
}

#[test]
fn a_signed_url_works_until_it_expires_and_a_forged_one_is_refused() {
    let content = bytes(4096);
    let server = DrsServer::start();
    let mut spec = ObjectSpec::blob("dg.TEST/signed", content.clone());
    spec.access = vec![AccessSpec::signed("https-1", Duration::from_secs(600))];
    server.add_object(spec);
    let url = resolve(&server, "dg.TEST%2Fsigned", "https-1");
    let got = client().get(&url).send().unwrap();
    assert_eq!(got.status(), StatusCode::OK);
    assert_eq!(got.bytes().unwrap().as_ref(), &content[..]);

    let forged = url.replace("sig=", "sig=00");
    assert_eq!(
        client().get(&forged).send().unwrap().status(),
        StatusCode::FORBIDDEN
    );
    let unsigned = server.data_url("dg.TEST/signed");
    assert_eq!(
        client().get(&unsigned).send().unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        drs_get(&server, "objects/dg.TEST%2Fsigned/access/nope").status(),
        StatusCode::NOT_FOUND
    );

    let mut short = ObjectSpec::blob("short", content);
    short.access = vec![AccessSpec::signed("https-1", Duration::ZERO)];
    server.add_object(short);
    let url = resolve(&server, "short", "https-1");
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(
        client().get(&url).send().unwrap().status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(server.counts().access, 3);
}

#[test]
fn counts_move_with_each_request_and_reset_to_zero() {
    let server = server_with(&["a"]);
    drs_get(&server, "service-info");
    drs_get(&server, "objects/a");
    drs_get(&server, "objects/a");
    bulk(&server, &["a".into()]);
    let counts = server.counts();
    assert_eq!(
        (counts.service_info, counts.objects_get, counts.bulk_post),
        (1, 2, 1),
        "{counts:?}"
    );
    server.reset_counts();
    assert_eq!(server.counts(), Counts::default());
}

#[test]
fn a_bundle_lists_its_members_and_sums_their_sizes() {
    let server = server_with(&["x", "y"]);
    server.add_bundle("both", Some("both"), &[("x.bin", "x"), ("y.bin", "y")]);
    let bundle = json_of(drs_get(&server, "objects/both?expand=true"));
    assert_eq!(bundle["size"], 1000 + 1001);
    let names: Vec<&str> = bundle["contents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["x.bin", "y.bin"]);
    assert!(bundle.get("access_methods").is_none(), "{bundle}");
}
