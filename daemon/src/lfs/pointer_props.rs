//! Property tests of the pointer parser (`cargo nextest run -p drsd props`;
//! `PROPTEST_CASES=100000` runs each longer): any bytes are refused or read
//! without a panic, what it writes it reads back, and near-valid texts are
//! taken or refused exactly as the real `git-lfs pointer --check` does.

use std::io::Write;
use std::process::{Command, Stdio};

use proptest::prelude::*;

use super::pointer::{Pointer, MAX_POINTER_SIZE};
use crate::pool::Oid;
use crate::props::config;

fn oid() -> impl Strategy<Value = Oid> + Clone {
    any::<[u8; 32]>().prop_map(Oid::from_digest)
}

/// Every size git-lfs can write: 0 ..= i64::MAX, the edges included.
fn size() -> impl Strategy<Value = u64> + Clone {
    prop_oneof![
        Just(0u64),
        Just(i64::MAX as u64),
        0u64..=1 << 40,
        0u64..=i64::MAX as u64,
    ]
}

fn pointer() -> impl Strategy<Value = Pointer> {
    (oid(), size()).prop_map(|(oid, size)| Pointer { oid, size })
}

/// What the spec says of the canonical text, checked line by line rather
/// than against the same format string.
fn assert_canonical(text: &str, p: &Pointer) {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    assert_eq!(lines.len(), 3, "{text:?}");
    assert!(lines
        .iter()
        .all(|l| l.ends_with('\n') && !l.ends_with("\r\n")));
    assert_eq!(lines[0], "version https://git-lfs.github.com/spec/v1\n");
    let hex = lines[1].strip_prefix("oid sha256:").unwrap().trim_end();
    assert_eq!(hex.len(), 64);
    assert!(hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
    let size = lines[2].strip_prefix("size ").unwrap().trim_end();
    assert!(size == "0" || !size.starts_with('0'), "{size}");
    assert_eq!(size.parse::<u64>().unwrap(), p.size);
    assert!((text.len() as u64) < MAX_POINTER_SIZE);
}

/// Near-valid pointer texts: each part picked from the valid form and the
/// mutations git-lfs is picky or lenient about.
fn near_valid() -> impl Strategy<Value = Vec<u8>> {
    let version = prop_oneof![
        4 => Just("https://git-lfs.github.com/spec/v1".to_string()),
        1 => Just("https://hawser.github.com/spec/v1".to_string()),
        1 => Just("http://git-media.io/v/2".to_string()),
        1 => Just("https://hawser.git-lfs.github.com/spec/v1".to_string()),
        1 => Just("https://git-lfs.github.com/spec/v2".to_string()),
        1 => Just(String::new()),
    ];
    let hex = oid().prop_map(|o| o.to_hex());
    let oid_value = prop_oneof![
        6 => hex.clone().prop_map(|h| format!("sha256:{h}")),
        1 => hex.clone().prop_map(|h| format!("sha256:{}", h.to_uppercase())),
        1 => hex.clone().prop_map(|h| format!("sha256:{}", &h[1..])),
        1 => hex.clone().prop_map(|h| format!("sha256:{h}0")),
        1 => hex.clone().prop_map(|h| format!("md5:{h}")),
        1 => hex.clone().prop_map(|h| format!(" sha256:{h}")),
    ];
    let size_value = prop_oneof![
        6 => size().prop_map(|s| s.to_string()),
        1 => (size(), 1usize..3).prop_map(|(s, n)| format!("{}{s}", "0".repeat(n))),
        1 => size().prop_map(|s| format!("+{s}")),
        1 => size().prop_map(|s| format!("-{s}")),
        1 => size().prop_map(|s| format!(" {s}")),
        1 => Just((i64::MAX as u64 + 1).to_string()),
        1 => Just(u64::MAX.to_string()),
        1 => Just(String::new()),
        1 => Just("0x10".to_string()),
    ];
    let ext = (
        prop_oneof![
            Just("ext-0-foo"),
            Just("ext-1-bar"),
            Just("ext-0-dup"),
            Just("ext-2-Up_per"),
            Just("ext-3-a.b"),
            Just("ext-10-x"),
            Just("ext-a-b"),
            Just("ext-0-"),
        ],
        prop_oneof![
            3 => hex.clone().prop_map(|h| format!("sha256:{h}")),
            1 => Just("sha256:abc".to_string()),
        ],
    )
        .prop_map(|(k, v)| format!("{k} {v}"));
    let extra = "[a-z0-9.-]{1,8}".prop_map(|k| format!("{k} 1"));
    (
        version,
        oid_value,
        size_value,
        proptest::collection::vec(ext, 0..3),
        proptest::option::weighted(0.15, (extra, 0usize..5)),
        proptest::option::weighted(0.15, (0usize..4, 0usize..4)),
        prop_oneof![6 => Just("\n"), 2 => Just("\r\n"), 1 => Just("\r")],
        prop_oneof![6 => Just(""), 1 => Just("\n"), 1 => Just(" "), 1 => Just("\u{a0}")],
        proptest::option::weighted(0.1, 0usize..5),
        proptest::option::weighted(0.05, 900usize..1100),
        any::<bool>(),
    )
        .prop_map(
            |(v, oid, size, exts, extra, swap, eol, edge, blank, pad, last_eol)| {
                let mut lines = vec![format!("version {v}")];
                lines.extend(exts);
                lines.push(format!("oid {oid}"));
                lines.push(format!("size {size}"));
                if let Some((line, at)) = extra {
                    lines.insert(at.min(lines.len()), line);
                }
                if let Some((a, b)) = swap {
                    let n = lines.len();
                    lines.swap(a % n, b % n);
                }
                if let Some(at) = blank {
                    lines.insert(at.min(lines.len()), String::new());
                }
                let mut text = format!("{edge}{}", lines.join(eol));
                if last_eol {
                    text.push_str(eol);
                }
                text.push_str(edge);
                if let Some(len) = pad {
                    while text.len() < len {
                        text.push('\n');
                    }
                }
                text.into_bytes()
            },
        )
}

/// `git-lfs pointer --check` on `bytes`: whether git-lfs takes them for a
/// pointer, and (with `strict`) whether they are its canonical form. That
/// command skips the 1024-byte cut-off git-lfs's blob scanner applies
/// before decoding (a padded pointer of 1100 bytes passes `--check`, but
/// `git lfs ls-files` does not list it); drsd reads blobs, so the cut-off is
/// applied here.
fn git_lfs_check(bytes: &[u8], strict: bool) -> bool {
    if bytes.len() as u64 >= MAX_POINTER_SIZE {
        return false;
    }
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(bytes).unwrap();
    let mut cmd = Command::new("git-lfs");
    cmd.args(["pointer", "--check", "--file"]).arg(file.path());
    if strict {
        cmd.arg("--strict");
    }
    let code = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("git-lfs runs (tests/ci/install-system-deps.sh installs it)")
        .code();
    assert!(
        matches!(code, Some(0..=2)),
        "git-lfs pointer --check exited {code:?}"
    );
    code == Some(0)
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn any_bytes_are_refused_or_read_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1100)) {
        if let Ok(p) = Pointer::parse(&bytes) {
            prop_assert_eq!(Pointer::parse(p.to_text().as_bytes()), Ok(p));
        }
    }

    #[test]
    fn a_written_pointer_is_canonical_and_reads_back_the_same(p in pointer()) {
        let text = p.to_text();
        assert_canonical(&text, &p);
        prop_assert_eq!(Pointer::parse(text.as_bytes()), Ok(p));
    }

    #[test]
    fn an_accepted_near_valid_text_rewrites_to_a_canonical_pointer_with_its_oid_and_size(bytes in near_valid()) {
        if let Ok(p) = Pointer::parse(&bytes) {
            let text = p.to_text();
            assert_canonical(&text, &p);
            prop_assert_eq!(Pointer::parse(text.as_bytes()), Ok(p));
            let lossy = String::from_utf8_lossy(&bytes);
            prop_assert!(lossy.contains(&p.oid.to_hex()), "{:?}", lossy);
            prop_assert!(p.size <= i64::MAX as u64);
        }
    }

    #[test]
    fn a_byte_edit_of_a_pointer_is_refused_or_read_without_a_panic(
        p in pointer(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let mut bytes = p.to_text().into_bytes();
        for (at, byte, how) in edits {
            let i = at.index(bytes.len() + 1);
            match how {
                0 => bytes.insert(i, byte),
                1 if i < bytes.len() => bytes[i] = byte,
                _ if i < bytes.len() => { bytes.remove(i); }
                _ => {}
            }
        }
        if let Ok(q) = Pointer::parse(&bytes) {
            prop_assert_eq!(Pointer::parse(q.to_text().as_bytes()), Ok(q));
        }
    }
}

proptest! {
    // Two git-lfs processes a case (about 20 ms on a busy machine).
    #![proptest_config(config(150))]

    #[test]
    fn near_valid_texts_are_taken_or_refused_as_git_lfs_does(bytes in near_valid()) {
        let ours = Pointer::parse(&bytes);
        let theirs = git_lfs_check(&bytes, false);
        prop_assert_eq!(
            ours.is_ok(), theirs,
            "{:?}: drsd says {:?}, git-lfs says pointer={}", String::from_utf8_lossy(&bytes), ours, theirs
        );
        if let Ok(p) = ours {
            // Canonical for git-lfs exactly when it is the text drsd writes
            // (extension lines are canonical to git-lfs; drsd drops them).
            let canonical = git_lfs_check(&bytes, true);
            let has_ext = String::from_utf8_lossy(&bytes).contains("ext-");
            // An empty object's canonical pointer is the empty file, which
            // drsd does not take for a pointer (nothing to fetch).
            if !has_ext && p.size != 0 {
                prop_assert_eq!(canonical, p.to_text().as_bytes() == &bytes[..], "{:?}", String::from_utf8_lossy(&bytes));
            }
        }
    }
}
