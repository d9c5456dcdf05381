//! The Git LFS pointer file (spec v1):
//!
//! ```text
//! version https://git-lfs.github.com/spec/v1
//! oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393
//! size 12345
//! ```
//!
//! `key value` lines, each ending in LF; `version` first, the other keys in
//! alphabetical order; keys are `[a-z0-9.-]`; `oid` and `size` are required.
//! Other keys (`ext-0-name ...`) are allowed and ignored here.

use crate::pool::Oid;

/// The version lines git-lfs accepts: the current one and the pre-1.0 one.
const VERSIONS: [&str; 2] = [
    "https://git-lfs.github.com/spec/v1",
    "https://hawser.git-lfs.github.com/spec/v1",
];

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
    Bad { line: usize, why: String },
}

impl Pointer {
    /// The pointer file's exact text, as git-lfs writes it.
    pub fn to_text(&self) -> String {
        format!(
            "version {}\noid sha256:{}\nsize {}\n",
            VERSIONS[0], self.oid, self.size
        )
    }

    /// Parses a pointer file's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Pointer, PointerError> {
        if bytes.len() as u64 >= MAX_POINTER_SIZE {
            return Err(PointerError::NotPointer("1024 bytes or more"));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| PointerError::NotPointer("not UTF-8"))?;
        let Some(body) = text.strip_suffix('\n') else {
            return Err(PointerError::NotPointer("does not end with a newline"));
        };
        let mut lines = body.split('\n').enumerate().map(|(i, l)| (i + 1, l));
        let (_, first) = lines.next().unwrap_or((1, ""));
        match first.split_once(' ') {
            Some(("version", v)) if VERSIONS.contains(&v) => {}
            Some(("version", _)) => return Err(PointerError::NotPointer("unknown version")),
            _ => return Err(PointerError::NotPointer("no version line first")),
        }
        read_keys(lines)
    }
}

/// Reads the lines after `version`: sorted keys, `oid` and `size` required.
fn read_keys<'a>(lines: impl Iterator<Item = (usize, &'a str)>) -> Result<Pointer, PointerError> {
    let (mut oid, mut size, mut last_key) = (None, None, "");
    for (line, text) in lines {
        let bad = |why: String| PointerError::Bad { line, why };
        let (key, value) = text
            .split_once(' ')
            .ok_or_else(|| bad(format!("{text:?} is not `key value`")))?;
        if key.is_empty()
            || !key
                .bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-'))
        {
            return Err(bad(format!("bad key {key:?}")));
        }
        if key <= last_key {
            return Err(bad(format!("key {key:?} is out of order or repeated")));
        }
        last_key = key;
        match key {
            "oid" => oid = Some(parse_oid(value).map_err(bad)?),
            "size" => size = Some(parse_size(value).map_err(bad)?),
            _ => {}
        }
    }
    match (oid, size) {
        (Some(oid), Some(size)) => Ok(Pointer { oid, size }),
        (None, _) => Err(PointerError::Bad {
            line: 0,
            why: "no oid".into(),
        }),
        (_, None) => Err(PointerError::Bad {
            line: 0,
            why: "no size".into(),
        }),
    }
}

fn parse_oid(value: &str) -> Result<Oid, String> {
    let hex = value
        .strip_prefix("sha256:")
        .ok_or_else(|| format!("oid {value:?} is not sha256:<64 hex>"))?;
    hex.parse()
        .map_err(|_| format!("oid {value:?} is not sha256:<64 lowercase hex>"))
}

fn parse_size(value: &str) -> Result<u64, String> {
    // Digits only: u64's parser would also take a leading `+`.
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("size {value:?} is not a decimal number"));
    }
    // git-lfs reads the size as a signed 64-bit integer; so does SQLite.
    value
        .parse()
        .ok()
        .filter(|n| *n <= crate::MAX_OBJECT_SIZE)
        .ok_or_else(|| format!("size {value:?} is too large"))
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
            "ext-0-foo sha256:abc",
            &format!("oid sha256:{OID}"),
            "size 7",
        ]);
        assert_eq!(Pointer::parse(t.as_bytes()).unwrap().size, 7);
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
            (format!("{v}\n{oid}\nsize 1"), "newline"),
            (text(&[v, "size 1", &oid]), "out of order"),
            (text(&[v, &oid]), "no size"),
            (text(&[v, "size 1"]), "no oid"),
            (text(&[v, "oid md5:abc", "size 1"]), "sha256:<64 hex>"),
            (
                text(&[v, &format!("oid sha256:{}", OID.to_uppercase()), "size 1"]),
                "lowercase",
            ),
            (text(&[v, &oid, "size -1"]), "decimal"),
            (text(&[v, &oid, "size +1"]), "decimal"),
            (text(&[v, &oid, "Size 1"]), "bad key"),
            (
                text(&[v, &oid, "size 99999999999999999999999"]),
                "too large",
            ),
            ("x".repeat(2000), "1024"),
            (String::new(), "newline"),
        ];
        for (input, want) in cases {
            let err = Pointer::parse(input.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(want), "{input:?}: {err} (wanted {want:?})");
        }
    }
}
