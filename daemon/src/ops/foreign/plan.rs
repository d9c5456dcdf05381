//! An add-url's lines checked before any HEAD: each URL parses, each path
//! is a file path inside the repo's work tree (not through a symlink, not
//! in `.git`, not twice), and what is already there may be replaced.
//! Refused lines are reported by their number and go no further.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use super::Refused;
use crate::lfs::track::{self, TrackError};
use crate::lfs::Pointer;
use crate::pool::Oid;
use crate::safe_write::SafeWriteError;
use crate::stores::ObjectUrl;

/// Why a line's path cannot take a pointer, naming the path.
#[derive(Debug, thiserror::Error)]
pub enum PathFault {
    #[error("{} is outside the repo {}", path.display(), top.display())]
    Outside { path: PathBuf, top: PathBuf },
    #[error("{} is not UTF-8", path.display())]
    NotUtf8 { path: PathBuf },
    /// The repo's top itself, or a path in git's own folder.
    #[error("{} is not a file path in the repo's work tree", path.display())]
    NotAFilePath { path: PathBuf },
    /// A name `.gitattributes` cannot track.
    #[error(transparent)]
    Inexpressible(TrackError),
    /// A folder on the way is a link or not a folder.
    #[error(transparent)]
    Folders(SafeWriteError),
    /// Looking at a file or folder on the way.
    #[error("checking {}: {error}", path.display())]
    Unchecked {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    /// A folder on the way whose real place is elsewhere.
    #[error("{} leads outside the repo {} (to {})", path.display(), top.display(), real.display())]
    LeadsOutside {
        path: PathBuf,
        top: PathBuf,
        real: PathBuf,
    },
    #[error("{} is a folder", path.display())]
    Folder { path: PathBuf },
    #[error("{} is a symbolic link; drsd does not write over links", path.display())]
    Link { path: PathBuf },
    #[error("{} exists and is not an LFS pointer; --force replaces it", path.display())]
    NotAPointer { path: PathBuf },
}

/// A `--sha256` that is not an oid.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("--sha256 {given:?} is not 64 hex digits")]
pub struct BadSha256 {
    pub given: String,
}

/// An expected md5 that is not one.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("the expected md5 {given:?} is not 32 hex digits")]
pub struct BadMd5 {
    pub given: String,
}

/// One line to add, as the client sent it.
#[derive(Debug, Clone)]
pub struct UrlLine {
    /// Its line in the client's `--from` list, or its place in the request.
    pub no: usize,
    pub url: String,
    /// Where its pointer goes, relative to the client's folder; the URL's
    /// file name when not given.
    pub path: Option<PathBuf>,
    /// The content's sha256, when the user knows it (`--sha256`).
    pub sha256: Option<String>,
    /// The object's size and md5 (hex) as the client was told them (a
    /// manifest's): see `expected.rs`.
    pub size: Option<u64>,
    pub md5: Option<String>,
}

/// A line whose URL parsed and whose path is usable.
pub(super) struct Target {
    pub no: usize,
    /// The URL as given (a signed URL whole).
    pub raw: String,
    pub url: ObjectUrl,
    /// The pointer's path, relative to the repo's top, `/`-separated.
    pub rel: String,
    pub sha256: Option<Oid>,
    /// What the object must be (`expected.rs`); the md5 in lowercase hex.
    pub size: Option<u64>,
    pub md5: Option<String>,
}

/// Checks each line's URL and path; refused lines go to `refused`.
pub(super) async fn plan(
    top: &Path,
    cwd: &Path,
    lines: Vec<UrlLine>,
    force: bool,
    refused: &mut Vec<Refused>,
) -> Vec<Target> {
    let (top, cwd) = (top.to_path_buf(), cwd.to_path_buf());
    let (targets, failed) = crate::blocking(move || {
        let mut seen = HashSet::new();
        let mut failed = Vec::new();
        let mut targets = Vec::new();
        for line in lines {
            match target(&top, &cwd, &line, force, &mut seen) {
                Ok(t) => targets.push(t),
                Err((url, message)) => failed.push(Refused {
                    line: line.no,
                    url,
                    message,
                }),
            }
        }
        (targets, failed)
    })
    .await;
    refused.extend(failed);
    targets
}

fn target(
    top: &Path,
    cwd: &Path,
    line: &UrlLine,
    force: bool,
    seen: &mut HashSet<String>,
) -> Result<Target, (String, String)> {
    let url = ObjectUrl::parse(&line.url).map_err(|e| {
        let shown = crate::stores::redacted(&line.url);
        (shown.chars().take(80).collect(), e.to_string())
    })?;
    let fail = |why: String| (url.to_string(), why);
    let given = match (&line.path, url.file_name()) {
        (Some(p), _) => p.clone(),
        (None, Some(name)) => PathBuf::from(name),
        (None, None) if matches!(url, ObjectUrl::Drs(_)) => {
            return Err(fail("a DRS id names no file: give PATH".into()))
        }
        (None, None) => return Err(fail("the URL has no file name: give PATH".into())),
    };
    let rel = repo_relative(top, &cwd.join(&given)).map_err(|e| fail(e.to_string()))?;
    if !seen.insert(rel.clone()) {
        return Err(fail(format!(
            "{rel} is already the path of an earlier line"
        )));
    }
    check_inside(top, &rel).map_err(|e| fail(e.to_string()))?;
    check_existing(&top.join(&rel), force).map_err(|e| fail(e.to_string()))?;
    let sha256 = match &line.sha256 {
        Some(hex) => Some(parse_sha256(hex).map_err(|e| fail(e.to_string()))?),
        None => None,
    };
    let md5 = match &line.md5 {
        Some(hex) => Some(parse_md5(hex).map_err(|e| fail(e.to_string()))?),
        None => None,
    };
    Ok(Target {
        no: line.no,
        raw: line.url.clone(),
        url,
        rel,
        sha256,
        size: line.size,
        md5,
    })
}

/// `abs` as a `/`-separated path inside `top` (`..` resolved without the
/// file system: the path need not exist yet).
pub fn repo_relative(top: &Path, abs: &Path) -> Result<String, PathFault> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in abs.components() {
        match c {
            Component::Normal(p) => parts.push(p),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    let clean: PathBuf = std::iter::once(Component::RootDir.as_os_str())
        .chain(parts)
        .collect();
    let rel = clean.strip_prefix(top).map_err(|_| PathFault::Outside {
        path: clean.clone(),
        top: top.to_path_buf(),
    })?;
    let text = rel.to_str().ok_or_else(|| PathFault::NotUtf8 {
        path: rel.to_path_buf(),
    })?;
    if text.is_empty() || rel.iter().any(is_git_dir_name) {
        return Err(PathFault::NotAFilePath { path: clean });
    }
    track::check_expressible(text).map_err(PathFault::Inexpressible)?;
    Ok(text.to_string())
}

/// A name git treats as its own folder, as it does on case-insensitive
/// filesystems (`core.protectNTFS`, `core.protectHFS`): `.git` in any
/// case, with trailing dots or spaces, or its short name `git~1`. git
/// refuses to stage a path through one, so it is refused before anything
/// is written.
fn is_git_dir_name(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy().to_ascii_lowercase();
    let name = name.trim_end_matches(['.', ' ']);
    name == ".git" || name == "git~1"
}

/// Refuses a repo-relative path that reaches through a symlink in the repo
/// (`linkout/x.bin` with `linkout -> /elsewhere`, or `-> sub`: git refuses
/// paths beyond a link), a file where a folder should be, or a folder whose
/// real place is not inside `top`, before anything is written.
pub(super) fn check_inside(top: &Path, rel: &str) -> Result<(), PathFault> {
    let parent = Path::new(rel).parent().unwrap_or(Path::new(""));
    crate::safe_write::check_dirs(top, parent).map_err(PathFault::Folders)?;
    // Belt and braces: the deepest folder that exists is really inside.
    let mut existing = top.join(parent);
    while !existing.exists() && existing != top {
        existing.pop();
    }
    let real = match existing.canonicalize() {
        Ok(real) => real,
        Err(error) => {
            return Err(PathFault::Unchecked {
                path: existing,
                error,
            })
        }
    };
    if !real.starts_with(top) {
        return Err(PathFault::LeadsOutside {
            path: top.join(rel),
            top: top.to_path_buf(),
            real,
        });
    }
    Ok(())
}

/// A file already at the path must be an LFS pointer, unless `force`.
pub(super) fn check_existing(path: &Path, force: bool) -> Result<(), PathFault> {
    let path_buf = || path.to_path_buf();
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => {
            return Err(PathFault::Unchecked {
                path: path_buf(),
                error,
            })
        }
    };
    if meta.is_dir() {
        return Err(PathFault::Folder { path: path_buf() });
    }
    if meta.file_type().is_symlink() {
        // Not even with --force: replacing a link is never what was meant.
        return Err(PathFault::Link { path: path_buf() });
    }
    let is_pointer = meta.is_file()
        && meta.len() < crate::lfs::MAX_POINTER_SIZE
        && std::fs::read(path).is_ok_and(|b| Pointer::parse(&b).is_ok());
    if is_pointer || force {
        return Ok(());
    }
    Err(PathFault::NotAPointer { path: path_buf() })
}

/// `--sha256 HEX`, in either case, as an oid.
fn parse_sha256(hex: &str) -> Result<Oid, BadSha256> {
    let lower = hex.trim().to_ascii_lowercase();
    lower.parse().map_err(|_| BadSha256 {
        given: hex.to_string(),
    })
}

/// An expected md5, in either case, as lowercase hex.
fn parse_md5(hex: &str) -> Result<String, BadMd5> {
    let lower = hex.trim().to_ascii_lowercase();
    let is_md5 = lower.len() == 32 && lower.bytes().all(|b| b.is_ascii_hexdigit());
    match is_md5 {
        true => Ok(lower),
        false => Err(BadMd5 {
            given: hex.chars().take(80).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_inside_the_repo_only() {
        let top = Path::new("/r");
        assert_eq!(
            repo_relative(top, Path::new("/r/a/../b/x.bam")).unwrap(),
            "b/x.bam"
        );
        assert_eq!(
            repo_relative(top, Path::new("/r/./x.bam")).unwrap(),
            "x.bam"
        );
        for bad in [
            "/r/../x.bam",
            "/other/x.bam",
            "/r",
            "/r/.git/config",
            "/r/.GIT/hooks/x",
            "/r/sub/.Git/x",
            "/r/.git. /x",
            "/r/GIT~1/x",
            "/r/a\nb.bam",
            "/r/a\tb.bam",
        ] {
            assert!(repo_relative(top, Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_sha256_option_is_taken_in_either_case_and_must_be_64_hex_digits() {
        let oid = Oid::of(b"x");
        assert_eq!(parse_sha256(&oid.to_hex().to_uppercase()), Ok(oid));
        assert_eq!(parse_sha256(&format!(" {oid} ")), Ok(oid));
        let err = parse_sha256("abc").unwrap_err();
        assert_eq!(err.to_string(), "--sha256 \"abc\" is not 64 hex digits");
    }

    #[test]
    fn an_expected_md5_is_taken_in_either_case_and_must_be_32_hex_digits() {
        let md5 = "900150983cd24fb0d6963f7d28e17f72";
        assert_eq!(parse_md5(&md5.to_uppercase()), Ok(md5.to_string()));
        for bad in [
            "",
            "abc",
            &md5[1..],
            &format!("{md5}0"),
            "g0150983cd24fb0d6963f7d28e17f72",
        ] {
            assert!(parse_md5(bad).is_err(), "{bad}");
        }
    }
}
