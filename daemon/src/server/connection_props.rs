//! Property tests of the daemon's request decoding (`cargo nextest run -p
//! drsd props`): whatever line a client sends, [`parse`] gives a request or
//! a `bad_request` / `too_long` answer carrying the line's id when it has
//! one; it never panics, however deep the JSON nests.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::parse;
use crate::props::config;
use drsd_proto::codec::Line;
use drsd_proto::*;

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 24, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            proptest::collection::btree_map(key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Keys a request has, and others.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "id", "method", "version", "client", "path", "repo", "oid", "size", "cwd",
            "entries", "from", "force", "no_fetch", "agent", "remote", "undo", "paths",
            "all", "dry_run", "updates", "url", "sha256",
        ])
        .prop_map(String::from),
        1 => "[a-z_]{1,8}",
    ]
}

/// Objects shaped like requests: an id (often a good one), a method (often
/// a real one), and fields of any type.
fn request_like() -> impl Strategy<Value = Value> {
    let id = prop_oneof![
        3 => any::<u64>().prop_map(Value::from),
        1 => json_value(),
    ];
    let method = prop_oneof![
        4 => prop::sample::select(vec![
            "hello", "status", "repos_add", "repos_remove", "repos_list", "pool_verify",
            "gc", "shutdown", "repo_init", "lfs_download", "add_url", "lfs_upload",
            "pre_push", "promote", "provisional", "hydrate",
        ])
        .prop_map(Value::from),
        1 => json_value(),
    ];
    (
        proptest::option::weighted(0.9, id),
        proptest::option::weighted(0.9, method),
        proptest::collection::btree_map(key(), json_value(), 0..5),
    )
        .prop_map(|(id, method, fields)| {
            let mut object: serde_json::Map<String, Value> = fields.into_iter().collect();
            if let Some(id) = id {
                object.insert("id".into(), id);
            }
            if let Some(method) = method {
                object.insert("method".into(), method);
            }
            Value::Object(object)
        })
}

/// The decoding contract for one text line.
fn check_line(text: &str) -> Result<(), TestCaseError> {
    match parse(Line::Text(text.to_string())) {
        Ok(frame) => {
            // What was read is a request that reads back the same.
            let again = serde_json::to_string(&frame).unwrap();
            prop_assert_eq!(parse(Line::Text(again)).ok(), Some(frame));
        }
        Err(answer) => {
            let id = serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| v.get("id").and_then(Value::as_u64));
            prop_assert_eq!(answer.id, id, "{}", text);
            let Body::Error { error } = answer.body else {
                return Err(TestCaseError::fail(format!("{text}: not an error")));
            };
            prop_assert_eq!(error.code, ErrorCode::BadRequest);
            prop_assert!(
                error.message.starts_with("not a request: "),
                "{}",
                error.message
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn any_text_line_is_a_request_or_a_bad_request_answer(text in any::<String>()) {
        check_line(&text)?;
    }

    #[test]
    fn any_json_line_is_a_request_or_a_bad_request_answer_with_its_id(value in json_value()) {
        check_line(&value.to_string())?;
    }

    #[test]
    fn a_request_shaped_line_is_a_request_or_a_bad_request_answer_with_its_id(value in request_like()) {
        check_line(&value.to_string())?;
    }

    #[test]
    fn json_nested_past_any_limit_is_a_bad_request_not_a_crash(
        depth in 100usize..30_000,
        open in prop::sample::select(vec!["[", "{\"a\":", "{\"id\":1,\"method\":"]),
    ) {
        let text = format!("{}1", open.repeat(depth));
        check_line(&text)?;
    }
}

#[test]
fn too_long_and_not_text_lines_get_their_own_answers() {
    let answer = |line| match parse(line).unwrap_err().body {
        Body::Error { error } => error,
        other => panic!("{other:?}"),
    };
    assert_eq!(answer(Line::TooLong).code, ErrorCode::TooLong);
    let not_text = answer(Line::NotText);
    assert_eq!(not_text.code, ErrorCode::BadRequest);
    assert!(not_text.message.contains("UTF-8"), "{}", not_text.message);
    let hello = json!({"id": 7, "method": "hello", "version": 1, "client": "x"});
    assert_eq!(parse(Line::Text(hello.to_string())).unwrap().id, 7);
}
