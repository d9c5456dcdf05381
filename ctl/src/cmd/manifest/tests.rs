use super::*;

const MD5: &str = "65196806d31002bd48abed020d861cf1";

fn file() -> &'static Path {
    Path::new("manifest.json")
}

fn parsed(text: &str) -> Result<Vec<ManifestEntry>, ManifestError> {
    parse(file(), text.as_bytes())
}

/// The error's text for a manifest that must be refused.
fn refused(text: &str) -> String {
    parsed(text).unwrap_err().to_string()
}

fn commons() -> Commons {
    Commons::parse("https://data.example.org").unwrap()
}

#[test]
fn a_portal_export_becomes_drs_lines_under_the_folder_with_size_and_md5() {
    let text = format!(
        r#"[
          {{"md5sum": "{upper}", "file_name": "a.sav", "file_size": 1566369,
            "object_id": "dg.XXTS/b96018c5", "subject_submitter_id": "s1", "extra": {{"x": [1]}}}},
          {{"object_id": "dg.XXTS/6d3eb293", "file_name": "b c.sav", "file_size": null,
            "md5": null, "commons_url": "test.commons1.io"}}
        ]"#,
        upper = MD5.to_uppercase()
    );
    let entries = parsed(&text).unwrap();
    assert!(
        needs_default(&entries),
        "the first entry has no commons_url"
    );
    let lines = lines(file(), entries, Path::new("data"), Some(&commons())).unwrap();
    assert_eq!(lines[0].url, "drs://data.example.org/dg.XXTS%2Fb96018c5");
    assert_eq!(lines[0].path, Some(PathBuf::from("data/a.sav")));
    assert_eq!(lines[0].size, Some(1566369));
    assert_eq!(lines[0].md5.as_deref(), Some(MD5), "lowercase");
    assert_eq!(lines[0].line, Some(1));
    assert_eq!(lines[1].url, "drs://test.commons1.io/dg.XXTS%2F6d3eb293");
    assert_eq!(lines[1].path, Some(PathBuf::from("data/b c.sav")));
    assert_eq!((lines[1].size, lines[1].md5.as_deref()), (None, None));
    assert_eq!(lines[1].line, Some(2));
}

#[test]
fn an_object_id_that_is_a_drs_uri_is_taken_as_it_is() {
    let entries =
        parsed(r#"[{"object_id": "drs://dg.4503:0a1b", "file_name": "x.cram"}]"#).unwrap();
    assert!(!needs_default(&entries));
    let lines = lines(file(), entries, Path::new(""), None).unwrap();
    assert_eq!(lines[0].url, "drs://dg.4503:0a1b");
    assert_eq!(lines[0].path, Some(PathBuf::from("x.cram")));
}

#[test]
fn the_commons_is_named_by_host_and_port_whatever_form_it_is_given_in() {
    for (given, want) in [
        ("https://data.example.org/", "data.example.org"),
        ("gen3+http://127.0.0.1:8080", "127.0.0.1:8080"),
        ("data.example.org", "data.example.org"),
        ("data.example.org:8443", "data.example.org:8443"),
        ("https://Data.Example.org/some/root", "data.example.org"),
    ] {
        assert_eq!(Commons::parse(given).unwrap().as_str(), want, "{given}");
    }
    for bad in ["", "ftp://h", "https://user:pw@h", "https://", "::"] {
        assert!(Commons::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn an_entry_without_a_commons_when_none_is_known_is_refused_by_index() {
    let entries = parsed(r#"[{"object_id": "dg.X/1", "file_name": "a"}]"#).unwrap();
    let err = lines(file(), entries, Path::new("d"), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("manifest.json, entry 1 (object_id \"dg.X/1\")") && err.contains("--commons"),
        "{err}"
    );
}

#[test]
fn a_file_that_is_not_json_is_refused_naming_the_file() {
    let err = refused("object_id,file_name\ndg.X/1,a\n");
    assert!(
        err.contains("manifest.json is not JSON") && err.contains("nothing was added"),
        "{err}"
    );
}

#[test]
fn json_that_is_not_a_list_or_an_empty_list_is_refused() {
    let err = refused(r#"{"object_id": "dg.X/1", "file_name": "a"}"#);
    assert!(err.contains("is an object, not a JSON list"), "{err}");
    assert!(refused("[]").contains("lists no entries"));
}

#[test]
fn each_kind_of_bad_entry_is_named_by_its_index_counted_from_one() {
    let good = r#"{"object_id": "dg.X/1", "file_name": "ok.bin"}"#;
    for (bad, says) in [
        (r#""dg.X/2""#, "entry 2: it is a string, not an object"),
        (r#"{"file_name": "b"}"#, "entry 2: it has no object_id"),
        (
            r#"{"object_id": "dg.X/2"}"#,
            "entry 2 (object_id \"dg.X/2\"): it has no file_name",
        ),
        (
            r#"{"object_id": 7, "file_name": "b"}"#,
            "its object_id is a number, not a string",
        ),
        (
            r#"{"object_id": "dg.X/2", "file_name": ["b"]}"#,
            "its file_name is a list, not a string",
        ),
        (
            r#"{"object_id": "dg.X/2", "file_name": "b", "file_size": "12"}"#,
            "its file_size \"12\" is not a number of bytes",
        ),
        (
            r#"{"object_id": "dg.X/2", "file_name": "b", "file_size": -1}"#,
            "its file_size -1 is not a number of bytes",
        ),
        (
            r#"{"object_id": "dg.X/2", "file_name": "b", "file_size": 1.5}"#,
            "its file_size 1.5 is not",
        ),
        (
            r#"{"object_id": "dg.X/2", "file_name": "b", "md5sum": "abc"}"#,
            "its md5sum \"abc\" is not an md5",
        ),
        (
            r#"{"object_id": "dg.X/2", "file_name": "b", "md5": 5}"#,
            "its md5 is a number, not a string",
        ),
        (
            r#"{"object_id": "dg.X/2", "file_name": "b", "md5": "00000000000000000000000000000000", "md5sum": "65196806d31002bd48abed020d861cf1"}"#,
            "disagree",
        ),
        (
            r#"{"object_id": "", "file_name": "b"}"#,
            "its object_id \"\" is empty",
        ),
        (
            r#"{"object_id": "dg.X/2 3", "file_name": "b"}"#,
            "holds a blank or control character",
        ),
        (
            r#"{"object_id": "dg.X/2", "file_name": "b", "commons_url": "ftp://h"}"#,
            "its commons_url \"ftp://h\" is not an http(s) URL",
        ),
    ] {
        let text = format!("[{good}, {bad}]");
        let err = refused(&text);
        assert!(
            err.contains("the manifest manifest.json, entry 2")
                && err.contains(says)
                && err.ends_with("nothing was added"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn hostile_file_names_are_refused() {
    for (name, says) in [
        ("../escape", "holds a `/`"),
        ("a/b", "holds a `/`"),
        ("..\\\\x", "holds a `/` or `\\`"),
        ("..", "is not a file name"),
        (".", "is not a file name"),
        ("", "is empty"),
        ("a\\nb", "control character"),
        ("a\\u0000b", "control character"),
        ("\\u001b[31mred", "control character"),
        ("-rf", "starts with `-`"),
        (".git", "git's own folder"),
        (".GIT. ", "git's own folder"),
        ("GIT~1", "git's own folder"),
    ] {
        let text = format!(r#"[{{"object_id": "dg.X/1", "file_name": "{name}"}}]"#);
        let err = refused(&text);
        assert!(
            err.contains("entry 1") && err.contains(says),
            "{name}: {err}"
        );
    }
    let long = "x".repeat(256);
    let err = refused(&format!(
        r#"[{{"object_id": "dg.X/1", "file_name": "{long}"}}]"#
    ));
    assert!(err.contains("longer than 255 bytes"), "{err}");
}

#[test]
fn a_file_name_given_twice_is_refused_naming_both_entries() {
    let err = refused(
        r#"[{"object_id": "dg.X/1", "file_name": "a.bam"},
            {"object_id": "dg.X/2", "file_name": "b.bam"},
            {"object_id": "dg.X/3", "file_name": "a.bam"}]"#,
    );
    assert!(
        err.contains("entry 3 (object_id \"dg.X/3\"): its file_name \"a.bam\" is the file_name of entry 1 too"),
        "{err}"
    );
}

#[test]
fn a_manifest_past_the_size_limit_stops_there() {
    let err = read_up_to(Path::new("/dev/zero"), 4096)
        .unwrap_err()
        .to_string();
    assert!(err.contains("/dev/zero is larger than 4096 bytes"), "{err}");
}

#[test]
fn a_missing_manifest_is_named() {
    let err = read(Path::new("/no/such/manifest.json"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("opening the manifest /no/such/manifest.json"),
        "{err}"
    );
}
