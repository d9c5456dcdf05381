//! The Git LFS pointer file (spec v1):
//!
//! ```text
//! version https://git-lfs.github.com/spec/v1
//! oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393
//! size 12345
//! ```
//!
//! [`Pointer::to_text`] writes exactly that canonical form. [`Pointer::parse`]
//! accepts what git-lfs's own decoder accepts, no more and no less: the
//! pre-push check and gc must see every blob git-lfs treats as a pointer,
//! or an object git-lfs pushes (or needs) slips past them. git-lfs trims
//! white space around the text, takes LF or CRLF lines, skips blank lines,
//! wants `version`, `oid`, `size` in that order with only `ext-N-name`
//! lines among them, takes the pre-1.0 version URLs, and parses the size as
//! a signed 64-bit decimal (so `+7` and `007` are 7, and 2^63 is refused).
//! The property tests in `pointer_props.rs` hold this against `git-lfs
//! pointer --check`.

use std::collections::BTreeMap;

use crate::Oid;

/// The version line git-lfs writes.
const VERSION: &str = "https://git-lfs.github.com/spec/v1";

/// The version URLs git-lfs's decoder accepts (`v1Aliases` in its
/// `lfs/pointer.go`): alpha, pre-release and the current one.
const VERSIONS: [&str; 3] = [
    "http://git-media.io/v/2",
    "https://hawser.github.com/spec/v1",
    VERSION,
];

/// The keys in the order git-lfs wants them.
const KEYS: [&str; 3] = ["version", "oid", "size"];

/// Blobs this size or larger are never pointers (git-lfs's own cut-off).
pub const MAX_POINTER_SIZE: u64 = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pointer {
    pub oid: Oid,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PointerError {
    #[error("not a Git LFS pointer: {0}")]
    NotPointer(&'static str),
    #[error("Git LFS pointer line {line}: {why}")]
    Bad { line: usize, why: BadLine },
}

/// What is wrong with a line of a pointer file that is otherwise one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadLine {
    #[error("no oid")]
    NoOid,
    #[error("no size")]
    NoSize,
    #[error("{0:?} is not `key value`")]
    NotKeyValue(String),
    #[error("a line after `size`: {0:?}")]
    AfterSize(String),
    #[error("key {key:?} where {want:?} belongs")]
    OutOfOrder { key: String, want: &'static str },
    #[error("oid {0:?} is not sha256:<64 hex>")]
    NotSha256(String),
    #[error("oid {0:?} is not sha256:<64 lowercase hex>")]
    NotHex(String),
    #[error("size {0:?} is not a decimal number")]
    NotDecimal(String),
    #[error("size {0:?} is too large")]
    TooLarge(String),
    #[error("size {0:?} is negative")]
    Negative(String),
    #[error("extension priority {0} repeated")]
    PriorityRepeated(usize),
}

impl Pointer {
    /// The pointer file's exact text, as git-lfs writes it.
    pub fn to_text(&self) -> String {
        format!(
            "version {VERSION}\noid sha256:{}\nsize {}\n",
            self.oid, self.size
        )
    }

    /// Parses a pointer file's bytes the way git-lfs does (see the module
    /// docs); the text need not be canonical.
    pub fn parse(bytes: &[u8]) -> Result<Pointer, PointerError> {
        if bytes.len() as u64 >= MAX_POINTER_SIZE {
            return Err(PointerError::NotPointer("1024 bytes or more"));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| PointerError::NotPointer("not UTF-8"))?;
        let keys = read_lines(text.trim())?;
        let value = |key: &str| keys.values.get(key).map(|(line, v)| (*line, v.as_str()));
        match value("version") {
            Some((_, v)) if VERSIONS.contains(&v) => {}
            Some(_) => return Err(PointerError::NotPointer("unknown version")),
            None => return Err(PointerError::NotPointer("no version line first")),
        }
        let (oid_line, oid) = value("oid").ok_or(PointerError::Bad {
            line: 0,
            why: BadLine::NoOid,
        })?;
        let oid = parse_oid(oid).map_err(|why| PointerError::Bad {
            line: oid_line,
            why,
        })?;
        let (size_line, size) = value("size").ok_or(PointerError::Bad {
            line: 0,
            why: BadLine::NoSize,
        })?;
        let size = parse_size(size).map_err(|why| PointerError::Bad {
            line: size_line,
            why,
        })?;
        check_extensions(&keys.extensions)?;
        Ok(Pointer { oid, size })
    }
}

/// The values of a pointer's lines, by key, with their line numbers.
#[derive(Default)]
struct Lines {
    values: BTreeMap<&'static str, (usize, String)>,
    /// `ext-N-name` lines (a repeated key keeps its last value, as in git-lfs).
    extensions: BTreeMap<String, (usize, String)>,
}

/// Reads the `key value` lines: `version`, `oid`, `size` in that order,
/// `ext-N-name` lines anywhere before `size`, nothing after it.
fn read_lines(text: &str) -> Result<Lines, PointerError> {
    let mut got = Lines::default();
    let mut next = 0;
    for (i, raw) in text.split('\n').enumerate() {
        let line = i + 1;
        let text = raw.strip_suffix('\r').unwrap_or(raw);
        if text.is_empty() {
            continue;
        }
        let bad = |why: BadLine| PointerError::Bad { line, why };
        let (key, value) = text
            .split_once(' ')
            .ok_or_else(|| bad(BadLine::NotKeyValue(text.into())))?;
        let Some(&want) = KEYS.get(next) else {
            return Err(bad(BadLine::AfterSize(text.into())));
        };
        if key == want {
            got.values.insert(want, (line, value.to_string()));
            next += 1;
        } else if is_extension(key) {
            got.extensions.insert(key.into(), (line, value.to_string()));
        } else if next == 0 {
            return Err(PointerError::NotPointer("no version line first"));
        } else {
            let key = key.into();
            return Err(bad(BadLine::OutOfOrder { key, want }));
        }
    }
    Ok(got)
}

/// `ext-<digit>-<word>...`, git-lfs's `\Aext-\d{1}-\w+` (a prefix match).
fn is_extension(key: &str) -> bool {
    let b = key.as_bytes();
    b.len() > 6
        && key.starts_with("ext-")
        && b[4].is_ascii_digit()
        && b[5] == b'-'
        && (b[6].is_ascii_alphanumeric() || b[6] == b'_')
}

/// Each extension's value is an oid, and no two share a priority.
fn check_extensions(exts: &BTreeMap<String, (usize, String)>) -> Result<(), PointerError> {
    let mut priorities = [false; 10];
    for (key, (line, value)) in exts {
        let bad = |why: BadLine| PointerError::Bad { line: *line, why };
        parse_oid(value).map_err(bad)?;
        let priority = usize::from(key.as_bytes()[4] - b'0');
        if std::mem::replace(&mut priorities[priority], true) {
            return Err(bad(BadLine::PriorityRepeated(priority)));
        }
    }
    Ok(())
}

fn parse_oid(value: &str) -> Result<Oid, BadLine> {
    let hex = value
        .strip_prefix("sha256:")
        .ok_or_else(|| BadLine::NotSha256(value.into()))?;
    hex.parse().map_err(|_| BadLine::NotHex(value.into()))
}

/// A signed 64-bit decimal that is not negative, as git-lfs's
/// `strconv.ParseInt(value, 10, 64)`: an optional sign, then digits.
fn parse_size(value: &str) -> Result<u64, BadLine> {
    let digits = value
        .strip_prefix('+')
        .or_else(|| value.strip_prefix('-'))
        .unwrap_or(value);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BadLine::NotDecimal(value.into()));
    }
    let size: i64 = value.parse().map_err(|_| BadLine::TooLarge(value.into()))?;
    u64::try_from(size).map_err(|_| BadLine::Negative(value.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    const OID: &str = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";

    fn text(lines: &[&str]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn parses_what_git_lfs_writes() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("sample.bam");
        std::fs::write(&file, b"ACGT".repeat(1000)).unwrap();
        let out = Command::new("git")
            .args(["lfs", "pointer", "--file"])
            .arg(&file)
            .output()
            .expect("git lfs runs (tests/ci/install-system-deps.sh installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pointer = Pointer::parse(&out.stdout).unwrap();
        assert_eq!(pointer.oid, Oid::of(&b"ACGT".repeat(1000)));
        assert_eq!(pointer.size, 4000);
        assert_eq!(pointer.to_text().as_bytes(), &out.stdout[..]);
    }

    #[test]
    fn extension_keys_are_allowed_in_order() {
        let t = text(&[
            "version https://git-lfs.github.com/spec/v1",
            &format!("ext-0-foo sha256:{OID}"),
            &format!("oid sha256:{OID}"),
            "size 7",
        ]);
        assert_eq!(Pointer::parse(t.as_bytes()).unwrap().size, 7);
    }

    /// git-lfs's decoder takes these for pointers (its pre-push pushes their
    /// objects, gc must keep them), so drsd must too.
    #[test]
    fn texts_git_lfs_takes_for_pointers_are_pointers_though_not_canonical() {
        let v = "version https://git-lfs.github.com/spec/v1";
        let oid = format!("oid sha256:{OID}");
        let cases: Vec<String> = vec![
            format!("{v}\r\n{oid}\r\nsize 7\r\n"),
            format!("{v}\n{oid}\nsize 7"),
            text(&[v, &oid, "size 007"]),
            text(&[v, &oid, "size +7"]),
            format!("\n  {v}\n\n{oid}\nsize 7\n\n\u{a0}"),
            text(&["version https://hawser.github.com/spec/v1", &oid, "size 7"]),
            text(&["version http://git-media.io/v/2", &oid, "size 7"]),
            text(&[&format!("ext-0-x sha256:{OID}"), v, &oid, "size 7"]),
        ];
        for input in cases {
            let p = Pointer::parse(input.as_bytes()).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!((p.oid.to_hex().as_str(), p.size), (OID, 7), "{input:?}");
            assert_ne!(p.to_text(), input, "{input:?} is not canonical");
        }
    }

    #[test]
    fn bad_pointers_are_refused_with_the_reason() {
        let v = "version https://git-lfs.github.com/spec/v1";
        let oid = format!("oid sha256:{OID}");
        let cases: Vec<(String, &str)> = vec![
            (text(&[&oid, "size 1"]), "no version line first"),
            (
                text(&["version https://example.invalid/v9", &oid, "size 1"]),
                "unknown version",
            ),
            (text(&[v, "size 1", &oid]), "\"size\" where \"oid\" belongs"),
            (text(&[v, &oid, "size 1", "zzz 1"]), "after `size`"),
            (
                text(&[v, "aaa 1", &oid, "size 1"]),
                "\"aaa\" where \"oid\" belongs",
            ),
            (text(&[v, &oid]), "no size"),
            (text(&[v, "size 1"]), "\"size\" where \"oid\" belongs"),
            (text(&[v]), "no oid"),
            (text(&[v, "oid md5:abc", "size 1"]), "sha256:<64 hex>"),
            (
                text(&[v, &format!("oid sha256:{}", OID.to_uppercase()), "size 1"]),
                "lowercase",
            ),
            (text(&[v, &oid, "size -1"]), "negative"),
            (text(&[v, &oid, "size 1x"]), "decimal"),
            (
                text(&[v, &oid, "Size 1"]),
                "\"Size\" where \"size\" belongs",
            ),
            (
                text(&[v, &oid, "size 99999999999999999999999"]),
                "too large",
            ),
            (text(&[v, &oid, "size 9223372036854775808"]), "too large"),
            (
                text(&[
                    "version https://hawser.git-lfs.github.com/spec/v1",
                    &oid,
                    "size 1",
                ]),
                "unknown version",
            ),
            (
                text(&[v, "ext-0-a sha256:abc", &oid, "size 1"]),
                "sha256:<64 lowercase hex>",
            ),
            (
                text(&[
                    v,
                    &format!("ext-0-a sha256:{OID}"),
                    &format!("ext-0-b sha256:{OID}"),
                    &oid,
                    "size 1",
                ]),
                "priority 0 repeated",
            ),
            ("x".repeat(2000), "1024"),
            (String::new(), "no version line first"),
            ("\n \r\n".into(), "no version line first"),
        ];
        for (input, want) in cases {
            let err = Pointer::parse(input.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(want), "{input:?}: {err} (wanted {want:?})");
        }
    }
}
