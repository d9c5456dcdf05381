//! The tests' Gen3 server (`drsd_e2e::drs_server`) answers as real Indexd
//! 6.3 and Fence do, driven over plain HTTP: Indexd's strict schema, a
//! chosen did that exists, updates by `rev`, blank records completed,
//! writes with a Fence token once Arborist is configured; Fence's upload
//! (whole and multipart) and download routes with signed URLs that expire
//! as S3's do. Last, drsd itself: a `drs://HOST/<baseid>` resolves to the
//! newest version of the record.

use std::time::Duration;

use drsd_e2e::drs_server::{DrsServer, NewRecord, UPLOAD_BUCKET};
use md5::{Digest, Md5};
use reqwest::blocking::{Client, RequestBuilder, Response};
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::add_url::{pointer_text, sha256_hex, World};
use super::foreign::staged;

fn client() -> Client {
    Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("an HTTP client")
}

fn md5_hex(bytes: &[u8]) -> String {
    hex::encode(Md5::digest(bytes))
}

fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(seed) ^ (i >> 9) as u8)
        .collect()
}

/// A valid `POST /index/` body for `content`.
fn record_body(content: &[u8]) -> Value {
    json!({
        "form": "object",
        "size": content.len(),
        "hashes": { "md5": md5_hex(content), "sha256": sha256_hex(content) },
        "urls": ["s3://commons-bucket/reads.cram"],
        "file_name": "reads.cram",
        "authz": ["/programs/p/projects/q"],
    })
}

/// The answer's status and JSON body (Null when it has none). Fence's
/// HTML error page reads as `{"page": true, "message": ...}`, the message
/// being what the page shows under "Error Message:" (none from 500 up).
fn answer(response: Response) -> (StatusCode, Value) {
    let status = response.status();
    let html = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with("text/html"));
    let text = response.text().expect("a body");
    if html {
        return (
            status,
            json!({"page": true, "message": page_message(&text)}),
        );
    }
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The message Fence's error page shows, unescaped.
fn page_message(page: &str) -> Option<String> {
    let (_, after) = page.split_once("Error Message:</p>")?;
    let (_, after) = after.split_once("<p class=\"introduction\">")?;
    let (message, _) = after.split_once("</p>")?;
    Some(
        message
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&#34;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&"),
    )
}

/// `request` with Indexd's Basic login.
fn as_indexd(server: &DrsServer, request: RequestBuilder) -> RequestBuilder {
    let (user, password) = server.indexd_login();
    request.basic_auth(user, Some(password))
}

fn post_index(server: &DrsServer, body: &Value) -> (StatusCode, Value) {
    let url = format!("{}/index/", server.base_url());
    answer(
        as_indexd(server, client().post(url).json(body))
            .send()
            .unwrap(),
    )
}

fn get_index(server: &DrsServer, did: &str) -> (StatusCode, Value) {
    let url = format!("{}/index/{did}", server.base_url());
    answer(client().get(url).send().unwrap())
}

fn put_index(
    server: &DrsServer,
    path: &str,
    rev: Option<&str>,
    body: &Value,
) -> (StatusCode, Value) {
    let mut url = format!("{}/index/{path}", server.base_url());
    if let Some(rev) = rev {
        url.push_str(&format!("?rev={rev}"));
    }
    answer(
        as_indexd(server, client().put(url).json(body))
            .send()
            .unwrap(),
    )
}

fn error_of(body: &Value) -> &str {
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("Indexd's error body: {body}"))
}

/// A change to a valid body, making it one Indexd refuses.
type Change = Box<dyn Fn(&mut Value)>;

#[test]
fn post_index_refuses_what_indexds_schema_refuses_with_its_words_and_takes_its_optional_fields() {
    let server = DrsServer::start();
    let content = bytes(3000, 3);
    let cases: [(&str, Change, &str); 6] = [
        (
            "a field outside the schema",
            Box::new(|b: &mut Value| b["checksum_sha256"] = json!("x")),
            "Additional properties are not allowed ('checksum_sha256' was unexpected)",
        ),
        (
            "no urls",
            Box::new(|b: &mut Value| {
                b.as_object_mut().unwrap().remove("urls");
            }),
            "'urls' is a required property",
        ),
        (
            "a negative size",
            Box::new(|b: &mut Value| b["size"] = json!(-1)),
            "-1 is less than the minimum of 0",
        ),
        (
            "an unknown form",
            Box::new(|b: &mut Value| b["form"] = json!("file")),
            "is not one of",
        ),
        (
            "an upper-case md5",
            Box::new(|b: &mut Value| b["hashes"]["md5"] = json!("ABC")),
            "md5 pattern",
        ),
        (
            "no hash Indexd knows",
            Box::new(|b: &mut Value| b["hashes"] = json!({"blake3": "00"})),
            "is not valid under any of the given schemas",
        ),
    ];
    for (case, change, said) in cases {
        let mut body = record_body(&content);
        change(&mut body);
        let (status, body) = post_index(&server, &body);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{case}: {body}");
        assert!(error_of(&body).contains(said), "{case}: {body}");
    }
    assert!(server
        .add_record(serde_json::from_value(record_body(&content)).unwrap())
        .is_ok());
    assert!(
        server
            .add_record(NewRecord {
                form: "file".into(),
                ..serde_json::from_value(record_body(&content)).unwrap()
            })
            .unwrap_err()
            .contains("is not one of"),
        "add_record checks as POST /index/ does"
    );

    let mut body = record_body(&content);
    body["version"] = json!("v2");
    body["description"] = json!("reads");
    body["metadata"] = json!({"assay": "wgs"});
    body["urls_metadata"] = json!({"s3://commons-bucket/reads.cram": {}});
    body["hashes"]["etag"] = json!(format!("{}-3", md5_hex(b"parts")));
    let (status, made) = post_index(&server, &body);
    assert_eq!(status, StatusCode::OK, "{made}");
    let did = made["did"].as_str().unwrap();
    assert!(did.starts_with("dg.TEST/"), "{did}");
    let (_, record) = get_index(&server, did);
    assert_eq!(record["version"], "v2", "{record}");
    assert_eq!(record["metadata"], json!({"assay": "wgs"}));
    assert_eq!(record["rev"], made["rev"]);
}

#[test]
fn a_chosen_did_that_exists_is_409_with_indexds_words_for_a_record_and_for_a_version() {
    let server = DrsServer::start();
    let did = "dg.TEST/5d0b6c4e-1f2a-4b3c-8d4e-5f6a7b8c9d0e";
    let mut body = record_body(b"first");
    body["did"] = json!(did);
    let (status, made) = post_index(&server, &body);
    assert_eq!((status, made["did"].as_str()), (StatusCode::OK, Some(did)));

    let mut again = record_body(b"second");
    again["did"] = json!(did);
    let (status, refused) = post_index(&server, &again);
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(error_of(&refused), format!("did \"{did}\" already exists"));
    let (_, kept) = get_index(&server, did);
    assert_eq!(
        kept["hashes"]["md5"],
        md5_hex(b"first"),
        "the record is unchanged"
    );

    let (status, other) = post_index(&server, &record_body(b"other"));
    assert_eq!(status, StatusCode::OK);
    let url = format!(
        "{}/index/{}",
        server.base_url(),
        other["did"].as_str().unwrap()
    );
    let (status, refused) = answer(
        as_indexd(&server, client().post(url).json(&again))
            .send()
            .unwrap(),
    );
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(error_of(&refused), format!("{did} already exists"));

    // A chosen baseid joins that lineage; a single lookup of it gives the newest.
    let mut joined = record_body(b"joined");
    joined["baseid"] = made["baseid"].clone();
    let (status, newest) = post_index(&server, &joined);
    assert_eq!(status, StatusCode::OK);
    assert_eq!(newest["baseid"], made["baseid"]);
    let (_, found) = get_index(&server, made["baseid"].as_str().unwrap());
    assert_eq!(found["did"], newest["did"], "{found}");
}

#[test]
fn put_index_with_the_current_rev_changes_what_indexd_lets_change_and_a_stale_rev_is_409() {
    let server = DrsServer::start();
    let content = bytes(4000, 5);
    let (_, made) = post_index(&server, &record_body(&content));
    let did = made["did"].as_str().unwrap().to_string();
    let rev = made["rev"].as_str().unwrap().to_string();

    let change = json!({"urls": ["s3://commons-bucket/moved.cram"], "file_name": "moved.cram", "version": "2"});
    let (status, changed) = put_index(&server, &did, Some(&rev), &change);
    assert_eq!(status, StatusCode::OK, "{changed}");
    let new_rev = changed["rev"].as_str().unwrap();
    assert_ne!(new_rev, rev);
    assert!(
        new_rev.len() == 8 && new_rev.bytes().all(|c| c.is_ascii_hexdigit()),
        "{new_rev}"
    );
    assert_eq!(changed["did"], did.as_str());
    let (_, record) = get_index(&server, &did);
    assert_eq!(record["urls"], json!(["s3://commons-bucket/moved.cram"]));
    assert_eq!(
        (record["file_name"].as_str(), record["rev"].as_str()),
        (Some("moved.cram"), Some(new_rev))
    );

    let (status, stale) = put_index(&server, &did, Some(&rev), &json!({"file_name": "x"}));
    assert_eq!(
        (status, error_of(&stale)),
        (StatusCode::CONFLICT, "revision mismatch")
    );
    let (status, _) = put_index(&server, &did, None, &json!({"file_name": "x"}));
    assert_eq!(status, StatusCode::CONFLICT, "no rev is a mismatch too");
    for forbidden in [
        json!({"size": 1}),
        json!({"hashes": {"md5": md5_hex(b"other")}}),
    ] {
        let (status, refused) = put_index(&server, &did, Some(new_rev), &forbidden);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{forbidden}: {refused}");
        assert!(
            error_of(&refused).starts_with("Additional properties are not allowed"),
            "{refused}"
        );
    }
    let (_, record) = get_index(&server, &did);
    assert_eq!(
        (record["size"].as_u64(), record["hashes"]["md5"].as_str()),
        (Some(4000), Some(md5_hex(&content).as_str()))
    );
    let missing = "dg.TEST/00000000-0000-4000-8000-000000000000";
    assert_eq!(
        put_index(&server, missing, Some(new_rev), &change).0,
        StatusCode::NOT_FOUND
    );
    let url = format!("{}/index/{did}?rev={new_rev}", server.base_url());
    let (status, refused) = answer(client().put(url).json(&change).send().unwrap());
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(server.counts().index_update, 7);
}

#[test]
fn a_blank_record_is_made_with_201_and_filled_once_by_put_index_blank_with_its_rev() {
    let server = DrsServer::start();
    let url = format!("{}/index/blank/", server.base_url());
    let body = json!({"uploader": "ann", "file_name": "late.bam", "authz": ["/programs/p"]});
    let (status, blank) = answer(
        as_indexd(&server, client().post(url).json(&body))
            .send()
            .unwrap(),
    );
    assert_eq!(status, StatusCode::CREATED, "{blank}");
    let did = blank["did"].as_str().unwrap().to_string();
    let rev = blank["rev"].as_str().unwrap().to_string();
    let (_, record) = get_index(&server, &did);
    assert_eq!(
        (
            record["size"].clone(),
            record["form"].clone(),
            record["uploader"].clone()
        ),
        (Value::Null, Value::Null, json!("ann"))
    );

    let content = bytes(2500, 7);
    let fill = json!({
        "size": content.len(),
        "hashes": {"md5": md5_hex(&content), "sha256": sha256_hex(&content)},
        "urls": [format!("s3://{UPLOAD_BUCKET}/{did}/late.bam")],
    });
    let path = format!("blank/{did}");
    assert_eq!(
        put_index(&server, &path, Some("0000abcd"), &fill).0,
        StatusCode::CONFLICT
    );
    let (status, filled) = put_index(&server, &path, Some(&rev), &fill);
    assert_eq!(status, StatusCode::OK, "{filled}");
    assert_ne!(filled["rev"], rev.as_str());
    let by_hash = format!(
        "{}/index?hash=sha256:{}",
        server.base_url(),
        sha256_hex(&content)
    );
    let (_, found) = answer(client().get(by_hash).send().unwrap());
    assert_eq!(found["records"][0]["did"], did.as_str(), "{found}");
    assert_eq!(found["records"][0]["authz"], json!(["/programs/p"]));
    let object = drs_object(&server, &did);
    assert_eq!(object["size"], content.len(), "{object}");
    assert_eq!(
        object["form"],
        Value::Null,
        "Indexd leaves a filled blank record's form null"
    );

    let (status, refused) = put_index(&server, &path, filled["rev"].as_str(), &fill);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        error_of(&refused),
        "update api is not supported for non-empty record!"
    );
}

fn drs_object(server: &DrsServer, id: &str) -> Value {
    let url = format!("{}/objects/{id}", server.drs_url());
    let (status, object) = answer(client().get(url).send().unwrap());
    assert_eq!(status, StatusCode::OK, "{id}: {object}");
    object
}

#[test]
fn an_indexd_record_lists_the_scheme_as_access_id_beside_the_raw_access_url() {
    let server = DrsServer::start();
    let (_, made) = post_index(&server, &record_body(b"listed"));
    let object = drs_object(&server, made["did"].as_str().unwrap());
    assert_eq!(
        object["access_methods"],
        json!([{"type": "s3", "access_id": "s3", "access_url": {"url": "s3://commons-bucket/reads.cram"}}])
    );
}

/// A Gen3 API key exchanged for a Fence access token.
fn fence_token(server: &DrsServer) -> String {
    server.set_api_key("key-1", "the-api-key");
    let url = format!("{}/user/credentials/api/access_token", server.base_url());
    let (status, body) = answer(
        client()
            .post(url)
            .json(&json!({"api_key": "the-api-key", "key_id": "key-1"}))
            .send()
            .unwrap(),
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    body["access_token"].as_str().unwrap().to_string()
}

#[test]
fn the_api_key_exchange_answers_as_fence_a_400_without_a_key_and_the_lifetime_asked_when_shorter() {
    let server = DrsServer::start();
    server.set_api_key("key-1", "the-api-key");
    let url = format!("{}/user/credentials/api/access_token", server.base_url());
    let (status, body) = answer(client().post(&url).json(&json!({})).send().unwrap());
    assert_eq!(
        (status, body["message"].as_str()),
        (
            StatusCode::BAD_REQUEST,
            Some("Please provide an api_key in payload")
        )
    );
    let (status, _) = answer(
        client()
            .post(&url)
            .json(&json!({"api_key": "wrong"}))
            .send()
            .unwrap(),
    );
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = answer(
        client()
            .post(format!("{url}?expires_in=60"))
            .json(&json!({"api_key": "the-api-key"}))
            .send()
            .unwrap(),
    );
    assert_eq!(status, StatusCode::OK);
    let payload = body["access_token"]
        .as_str()
        .unwrap()
        .split('.')
        .nth(1)
        .unwrap()
        .to_string();
    use base64::Engine;
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let exp = claims["exp"].as_u64().unwrap();
    assert!((now + 50..=now + 70).contains(&exp), "exp {exp}, now {now}");
}

#[test]
fn indexd_with_arborist_takes_a_fence_token_for_writes_and_answers_401_to_another() {
    let server = DrsServer::start();
    let token = fence_token(&server);
    let url = format!("{}/index/", server.base_url());
    let body = record_body(b"by token");
    let (status, refused) = answer(
        client()
            .post(&url)
            .bearer_auth(&token)
            .json(&body)
            .send()
            .unwrap(),
    );
    assert_eq!(status, StatusCode::FORBIDDEN, "no Arborist: {refused}");
    assert!(error_of(&refused).starts_with("Arborist is not configured"));

    server.set_arborist(true);
    let (status, made) = answer(
        client()
            .post(&url)
            .bearer_auth(&token)
            .json(&body)
            .send()
            .unwrap(),
    );
    assert_eq!(status, StatusCode::OK, "{made}");
    for wrong in [Some("not-a-token"), None] {
        let request = client().post(&url).json(&record_body(b"other"));
        let request = match wrong {
            Some(t) => request.bearer_auth(t),
            None => request,
        };
        let (status, refused) = answer(request.send().unwrap());
        assert_eq!(
            (status, error_of(&refused)),
            (StatusCode::UNAUTHORIZED, "Permission denied."),
            "{wrong:?}"
        );
    }
    server.expire_tokens();
    let (status, _) = answer(
        client()
            .post(&url)
            .bearer_auth(&token)
            .json(&record_body(b"late"))
            .send()
            .unwrap(),
    );
    assert_eq!(status, StatusCode::UNAUTHORIZED, "an expired token");
}

fn fence(server: &DrsServer, token: Option<&str>, path: &str, body: &Value) -> (StatusCode, Value) {
    let request = client()
        .post(format!("{}/user/data/{path}", server.base_url()))
        .json(body);
    let request = match token {
        Some(t) => request.bearer_auth(t),
        None => request,
    };
    answer(request.send().unwrap())
}

fn fence_get(server: &DrsServer, token: Option<&str>, path: &str) -> (StatusCode, Value) {
    let request = client().get(format!("{}/user/data/{path}", server.base_url()));
    let request = match token {
        Some(t) => request.bearer_auth(t),
        None => request,
    };
    answer(request.send().unwrap())
}

#[test]
fn every_fence_data_route_wants_a_bearer_token_and_says_so_in_fences_body() {
    let server = DrsServer::start();
    let (_, made) = post_index(&server, &record_body(b"private"));
    let did = made["did"].as_str().unwrap();
    let posts = [
        ("upload", json!({"file_name": "a"})),
        ("multipart/init", json!({"file_name": "a"})),
        (
            "multipart/upload",
            json!({"key": "k", "uploadId": "u", "partNumber": 1}),
        ),
        (
            "multipart/complete",
            json!({"key": "k", "uploadId": "u", "parts": []}),
        ),
    ];
    for (path, body) in posts {
        let (status, said) = fence(&server, None, path, &body);
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {said}");
        assert!(said["message"].is_string(), "{path}: {said}");
    }
    for path in [format!("upload/{did}"), format!("download/{did}")] {
        let (status, said) = fence_get(&server, Some("forged"), &path);
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {said}");
    }
    assert_eq!(server.counts().fence, 6);
}

/// PUTs `body` to a signed URL; the status, the ETag (unquoted) and the body.
fn put_to(url: &str, body: Vec<u8>) -> (StatusCode, String, String) {
    let response = client().put(url).body(body).send().unwrap();
    let status = response.status();
    let etag = response
        .headers()
        .get("etag")
        .map(|v| v.to_str().unwrap().trim_matches('"').to_string())
        .unwrap_or_default();
    (status, etag, response.text().unwrap())
}

fn get_bytes(url: &str) -> (StatusCode, Vec<u8>) {
    let response = client().get(url).send().unwrap();
    (response.status(), response.bytes().unwrap().to_vec())
}

#[test]
fn an_upload_through_fence_makes_a_blank_record_its_signed_url_stores_the_bytes_and_the_filled_record_downloads(
) {
    let server = DrsServer::start();
    server.set_arborist(true);
    let token = fence_token(&server);
    let (status, said) = fence(
        &server,
        Some(&token),
        "upload",
        &json!({"authz": ["/programs/p"]}),
    );
    assert_eq!(
        (status, said["message"].as_str()),
        (
            StatusCode::BAD_REQUEST,
            Some("missing required argument `file_name`")
        )
    );
    let (status, said) = fence(
        &server,
        Some(&token),
        "upload",
        &json!({"file_name": "a", "bucket": "elsewhere"}),
    );
    assert_eq!(status, StatusCode::FORBIDDEN, "{said}");

    let ask = json!({"file_name": "reads.bam", "authz": ["/programs/p/projects/q"]});
    let (status, upload) = fence(&server, Some(&token), "upload", &ask);
    assert_eq!(status, StatusCode::CREATED, "{upload}");
    let guid = upload["guid"].as_str().unwrap().to_string();
    let url = upload["url"].as_str().unwrap().to_string();
    let (_, blank) = get_index(&server, &guid);
    assert_eq!(
        (
            blank["size"].clone(),
            blank["authz"].clone(),
            blank["uploader"].clone()
        ),
        (Value::Null, json!(["/programs/p/projects/q"]), Value::Null)
    );

    let content = bytes(300_000, 11);
    let (status, etag, _) = put_to(&url, content.clone());
    assert_eq!(
        (status, etag.as_str()),
        (StatusCode::OK, md5_hex(&content).as_str())
    );
    let key = format!("{guid}/reads.bam");
    assert_eq!(
        server.bucket_object(&key).map(|(b, _)| b == content),
        Some(true)
    );
    let (status, _) = get_bytes(&url);
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "a URL signed for PUT does not GET"
    );

    // The client fills the blank record with a Fence token, as git-drs does.
    let fill = json!({
        "size": content.len(),
        "hashes": {"md5": md5_hex(&content), "sha256": sha256_hex(&content)},
        "urls": [format!("s3://{UPLOAD_BUCKET}/{key}")],
    });
    let put = format!(
        "{}/index/blank/{guid}?rev={}",
        server.base_url(),
        blank["rev"].as_str().unwrap()
    );
    let (status, filled) = answer(
        client()
            .put(put)
            .bearer_auth(&token)
            .json(&fill)
            .send()
            .unwrap(),
    );
    assert_eq!(status, StatusCode::OK, "{filled}");

    let (status, download) = fence_get(&server, Some(&token), &format!("download/{guid}"));
    assert_eq!(status, StatusCode::OK, "{download}");
    assert_eq!(
        get_bytes(download["url"].as_str().unwrap()),
        (StatusCode::OK, content.clone())
    );
    let (status, said) = fence_get(&server, None, &format!("download/{guid}"));
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{said}");
    assert!(
        said["message"].as_str().unwrap().contains("read-storage"),
        "{said}"
    );

    // DRS access by the access id Indexd lists: Fence's signed URL.
    let object = drs_object(&server, &guid);
    let access_id = object["access_methods"][0]["access_id"].as_str().unwrap();
    let access = format!("{}/objects/{guid}/access/{access_id}", server.drs_url());
    let (status, signed) = answer(client().get(&access).bearer_auth(&token).send().unwrap());
    assert_eq!(status, StatusCode::OK, "{signed}");
    assert_eq!(
        get_bytes(signed["url"].as_str().unwrap()),
        (StatusCode::OK, content)
    );
    let (status, _) = answer(client().get(&access).send().unwrap());
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let counts = server.counts();
    assert_eq!((counts.bucket_put, counts.bucket_get), (1, 2), "{counts:?}");
}

#[test]
fn a_record_registered_first_gets_its_upload_url_by_guid_and_an_unknown_guid_is_404() {
    let server = DrsServer::start();
    let token = fence_token(&server);
    let (_, made) = post_index(&server, &record_body(b"registered first"));
    let did = made["did"].as_str().unwrap();
    let (status, got) = fence_get(
        &server,
        Some(&token),
        &format!("upload/{did}?file_name=first.cram&expires_in=60"),
    );
    assert_eq!(status, StatusCode::OK, "{got}");
    let (status, _, _) = put_to(got["url"].as_str().unwrap(), b"registered first".to_vec());
    assert_eq!(status, StatusCode::OK);
    assert!(server.bucket_object(&format!("{did}/first.cram")).is_some());

    let (status, again) = fence(
        &server,
        Some(&token),
        "upload",
        &json!({"file_name": "second.cram", "guid": did}),
    );
    assert_eq!(
        (status, again["guid"].as_str()),
        (StatusCode::CREATED, Some(did)),
        "{again}"
    );
    let unknown = "dg.TEST/00000000-0000-4000-8000-000000000000";
    let (status, said) = fence_get(&server, Some(&token), &format!("upload/{unknown}"));
    assert_eq!(status, StatusCode::NOT_FOUND, "{said}");
    let (status, _) = fence(
        &server,
        Some(&token),
        "upload",
        &json!({"file_name": "x", "guid": unknown}),
    );
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The presigned URL of part `number`.
fn part_url(server: &DrsServer, token: &str, key: &str, upload: &str, number: u32) -> String {
    let ask = json!({"key": key, "uploadId": upload, "partNumber": number});
    let (status, said) = fence(server, Some(token), "multipart/upload", &ask);
    assert_eq!(status, StatusCode::OK, "{said}");
    said["presigned_url"].as_str().unwrap().to_string()
}

#[test]
fn a_multipart_upload_through_fence_is_assembled_as_s3_assembles_it() {
    let server = DrsServer::start();
    let token = fence_token(&server);
    let (status, init) = fence(
        &server,
        Some(&token),
        "multipart/init",
        &json!({"file_name": "big.bam"}),
    );
    assert_eq!(status, StatusCode::CREATED, "{init}");
    let guid = init["guid"].as_str().unwrap().to_string();
    let upload = init["uploadId"].as_str().unwrap().to_string();
    let (_, blank) = get_index(&server, &guid);
    assert_eq!(
        (blank["size"].clone(), blank["uploader"].clone()),
        (Value::Null, json!("key-1")),
        "{blank}"
    );

    let key = format!("{guid}/big.bam");
    let first = bytes(5 << 20, 13);
    let last = bytes(123_457, 17);
    let (status, etag1, _) = put_to(&part_url(&server, &token, &key, &upload, 1), first.clone());
    assert_eq!(
        (status, etag1.as_str()),
        (StatusCode::OK, md5_hex(&first).as_str())
    );
    let (_, etag2, _) = put_to(&part_url(&server, &token, &key, &upload, 2), last.clone());
    let (status, _, said) = put_to(
        &part_url(&server, &token, &key, "no-such-upload", 1),
        b"x".to_vec(),
    );
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(said.contains("<Code>NoSuchUpload</Code>"), "{said}");

    let complete = |parts: Value| {
        fence(
            &server,
            Some(&token),
            "multipart/complete",
            &json!({"key": key, "uploadId": upload, "parts": parts}),
        )
    };
    for (parts, code) in [
        (
            json!([{"PartNumber": 1, "ETag": etag1}, {"PartNumber": 2, "ETag": md5_hex(b"other")}]),
            "InvalidPart",
        ),
        (
            json!([{"PartNumber": 2, "ETag": etag2}, {"PartNumber": 1, "ETag": etag1}]),
            "InvalidPartOrder",
        ),
    ] {
        let (status, said) = complete(parts);
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{said}");
        assert!(
            said["message"].as_str().unwrap().contains(code),
            "{code}: {said}"
        );
    }
    // One part alone (the last one, however small) is a valid object.
    let (status, said) = complete(json!([{"PartNumber": 2, "ETag": etag2}]));
    assert_eq!(status, StatusCode::OK, "{said}");
    let (stored, etag) = server.bucket_object(&key).expect("completed");
    assert_eq!(stored, last);
    let mut md5s = Md5::new();
    md5s.update(Md5::digest(&last));
    assert_eq!(etag, format!("{}-1", hex::encode(md5s.finalize())));

    // A second upload: both parts, the first under 5 MiB refused, then whole.
    let (_, init) = fence(
        &server,
        Some(&token),
        "multipart/init",
        &json!({"file_name": "big.bam", "guid": guid}),
    );
    assert_eq!(init["guid"], guid.as_str(), "{init}");
    let upload = init["uploadId"].as_str().unwrap().to_string();
    let small = bytes(1000, 19);
    let (_, small_etag, _) = put_to(&part_url(&server, &token, &key, &upload, 1), small);
    let (_, etag2, _) = put_to(&part_url(&server, &token, &key, &upload, 2), last.clone());
    let body = |e1: &str| json!({"key": key, "uploadId": upload, "parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": format!("\"{etag2}\"")}]});
    let (status, said) = fence(
        &server,
        Some(&token),
        "multipart/complete",
        &body(&small_etag),
    );
    assert!(
        status == StatusCode::INTERNAL_SERVER_ERROR
            && said["message"].as_str().unwrap().contains("EntityTooSmall"),
        "{said}"
    );
    let (_, etag1, _) = put_to(&part_url(&server, &token, &key, &upload, 1), first.clone());
    let (status, said) = fence(&server, Some(&token), "multipart/complete", &body(&etag1));
    assert_eq!((status, said), (StatusCode::OK, json!({"message": "OK"})));
    let (stored, etag) = server.bucket_object(&key).unwrap();
    assert_eq!(stored, [first.clone(), last.clone()].concat());
    let mut md5s = Md5::new();
    md5s.update(Md5::digest(&first));
    md5s.update(Md5::digest(&last));
    assert_eq!(etag, format!("{}-2", hex::encode(md5s.finalize())));
}

#[test]
fn signed_urls_expire_and_are_then_refused_with_403_as_s3_refuses_them() {
    let server = DrsServer::start();
    let token = fence_token(&server);
    server.set_signed_url_ttl(Duration::from_secs(1));
    let (_, upload) = fence(
        &server,
        Some(&token),
        "upload",
        &json!({"file_name": "soon.bin", "expires_in": 3600}),
    );
    let url = upload["url"].as_str().unwrap().to_string();
    let expires: u64 = url::Url::parse(&url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "expires")
        .unwrap()
        .1
        .parse()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(
        expires <= now + 1,
        "expires_in is capped by the lifetime set: {expires} vs {now}"
    );

    let forged = format!("{}0", url);
    let (status, _, said) = put_to(&forged, b"x".to_vec());
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        said.contains("<Code>SignatureDoesNotMatch</Code>"),
        "{said}"
    );
    let unsigned = url.split('?').next().unwrap();
    let (status, _, said) = put_to(unsigned, b"x".to_vec());
    assert!(
        status == StatusCode::FORBIDDEN && said.contains("<Code>AccessDenied</Code>"),
        "{said}"
    );

    let (status, _, _) = put_to(&url, b"in time".to_vec());
    assert_eq!(status, StatusCode::OK);
    let guid = upload["guid"].as_str().unwrap();
    let (_, blank) = get_index(&server, guid);
    let fill = json!({"size": 7, "hashes": {"md5": md5_hex(b"in time")}, "urls": [format!("s3://{UPLOAD_BUCKET}/{guid}/soon.bin")]});
    let (status, _) = put_index(
        &server,
        &format!("blank/{guid}"),
        blank["rev"].as_str(),
        &fill,
    );
    assert_eq!(status, StatusCode::OK);
    let (_, download) = fence_get(&server, Some(&token), &format!("download/{guid}"));
    let download = download["url"].as_str().unwrap().to_string();

    std::thread::sleep(Duration::from_millis(2100));
    let (status, _, said) = put_to(&url, b"too late".to_vec());
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        said.contains("<Code>AccessDenied</Code><Message>Request has expired</Message>"),
        "{said}"
    );
    let response = client().get(&download).send().unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(response.text().unwrap().contains("Request has expired"));
    assert_eq!(
        server.bucket_object(&format!("{guid}/soon.bin")).unwrap().0,
        b"in time"
    );

    let (status, said) = fence(
        &server,
        Some(&token),
        "upload",
        &json!({"file_name": "x", "expires_in": -5}),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST, "{said}");
}

#[test]
fn fence_signs_no_location_outside_its_bucket_and_a_public_record_downloads_without_a_token() {
    let server = DrsServer::start();
    let token = fence_token(&server);
    let (_, elsewhere) = post_index(&server, &record_body(b"elsewhere"));
    let did = elsewhere["did"].as_str().unwrap();
    let (status, said) = fence_get(&server, Some(&token), &format!("download/{did}"));
    // Fence's page shows no message from 500 up.
    assert_eq!(
        (status, &said["page"], said["message"].as_str()),
        (StatusCode::INTERNAL_SERVER_ERROR, &json!(true), None)
    );
    let (status, _) = fence_get(
        &server,
        Some(&token),
        &format!("download/{did}?protocol=gs"),
    );
    assert_eq!(status, StatusCode::NOT_FOUND);

    let content = b"open data".to_vec();
    let location = server.put_in_bucket("open/data.txt", content.clone());
    let mut public = record_body(&content);
    public["urls"] = json!([location]);
    public["acl"] = json!(["*"]);
    public["authz"] = json!([]);
    let (_, made) = post_index(&server, &public);
    let did = made["did"].as_str().unwrap();
    let (status, download) = fence_get(&server, None, &format!("download/{did}"));
    assert_eq!(status, StatusCode::OK, "{download}");
    assert_eq!(
        get_bytes(download["url"].as_str().unwrap()),
        (StatusCode::OK, content)
    );
}

/// drsd: `drs://HOST/<baseid>` resolves, through Indexd's single lookup,
/// to the newest version of the record (the bulk lookup, exact, leaves it
/// unresolved).
#[test]
fn a_baseid_under_a_host_resolves_to_the_newest_version_of_its_record() {
    const HOST: &str = "drs.example.org";
    let server = DrsServer::start();
    std::env::set_var("DRSD_DRS_SERVERS", format!("{HOST}={}", server.base_url()));
    let world = World::new();
    let repo = world.repo("r");
    let old = bytes(2_345, 23);
    let new = bytes(3_456, 29);
    let (_, first) = post_index(&server, &record_body(&old));
    let url = format!(
        "{}/index/{}",
        server.base_url(),
        first["did"].as_str().unwrap()
    );
    let (status, newer) = answer(
        as_indexd(&server, client().post(url).json(&record_body(&new)))
            .send()
            .unwrap(),
    );
    assert_eq!(status, StatusCode::OK, "{newer}");
    let baseid = first["baseid"].as_str().unwrap();
    let added = world.drsctl_ok(
        &repo,
        &["add-url", &format!("drs://{HOST}/{baseid}"), "newest.bam"],
    );
    assert_eq!(added["added"][0]["oid_from"], "drs_checksum", "{added}");
    assert_eq!(
        staged(&repo, "newest.bam"),
        pointer_text(&sha256_hex(&new), new.len() as u64)
    );
}

/// Fence 13.3.0 begins an upload under a guid only for a record Indexd
/// holds (`BlankIndex.__init__` reads `index_document["did"]`): an unknown
/// guid is 404 with Fence's page naming it, and makes nothing; a record
/// registered first is used as it is (key `{did}/{file_name}`), neither
/// filled nor changed. A Fence before 10.2.0 ignores the guid and makes a
/// blank record.
#[test]
fn a_multipart_upload_under_a_guid_indexd_lacks_is_404_and_under_a_registered_one_leaves_it_as_it_is(
) {
    let server = DrsServer::start();
    let token = fence_token(&server);
    let chosen = "0b9c6f1e-7d1a-5e2b-9c3d-4e5f60718293";
    let init = |server: &DrsServer| {
        let body = json!({"file_name": "x.bam", "guid": chosen});
        fence(server, Some(&token), "multipart/init", &body)
    };
    let (status, refused) = init(&server);
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    assert_eq!(
        refused["message"].as_str(),
        Some(format!("No indexed document found with id {chosen}").as_str()),
        "{refused}"
    );
    assert_eq!(get_index(&server, chosen).0, StatusCode::NOT_FOUND);
    assert!(server.blank_records().is_empty());

    let mut claim = record_body(b"claimed");
    claim["did"] = json!(chosen);
    claim["urls"] = json!([]);
    let (status, made) = post_index(&server, &claim);
    assert_eq!(status, StatusCode::OK, "{made}");
    let (status, taken) = init(&server);
    assert_eq!(status, StatusCode::CREATED, "{taken}");
    assert_eq!(taken["guid"], chosen, "{taken}");
    let (_, record) = get_index(&server, chosen);
    assert_eq!(
        record["rev"], made["rev"],
        "the record is untouched: {record}"
    );
    assert_eq!(record["urls"], json!([]), "{record}");

    server.set_fence_before_10_2(true);
    let (status, ignored) = init(&server);
    assert_eq!(status, StatusCode::CREATED, "{ignored}");
    let guid = ignored["guid"].as_str().unwrap();
    assert_ne!(guid, chosen, "{ignored}");
    assert_eq!(server.blank_records(), vec![guid.to_string()]);
}

/// Fence answers errors with its HTML page, whatever the client accepts:
/// the status, its reason and (under 500) the message, escaped.
#[test]
fn fence_answers_errors_with_its_html_page_showing_the_message_under_500_only() {
    let server = DrsServer::start();
    let token = fence_token(&server);
    let response = client()
        .post(format!("{}/user/data/multipart/init", server.base_url()))
        .bearer_auth(&token)
        .header("accept", "application/json")
        .json(&json!({"file_name": "x", "guid": "<no-such>"}))
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(kind.starts_with("text/html"), "{kind}");
    let page = response.text().unwrap();
    assert!(
        page.contains("<h1>404</h1>") && page.contains("<h2>Not Found</h2>"),
        "{page}"
    );
    assert!(
        page.contains("No indexed document found with id &lt;no-such&gt;"),
        "{page}"
    );
    assert_eq!(
        page_message(&page).as_deref(),
        Some("No indexed document found with id <no-such>")
    );
}
