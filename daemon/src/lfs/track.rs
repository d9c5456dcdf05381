//! Making paths LFS-tracked and staging them, the way `git lfs track PATH`
//! and `git add PATH` would, with one git process per step for any number
//! of paths.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The attributes `git lfs track` writes.
pub const LFS_ATTRIBUTES: &str = "filter=lfs diff=lfs merge=lfs -text";

#[derive(Debug, thiserror::Error)]
pub enum TrackError {
    #[error("{what} in {repo}: {why}")]
    Git {
        what: &'static str,
        repo: std::path::PathBuf,
        why: String,
    },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// For each repo-relative path, whether its `filter` attribute is `lfs`.
pub fn tracked(top: &Path, paths: &[&str]) -> Result<Vec<bool>, TrackError> {
    let out = run_with_input(
        top,
        &["check-attr", "-z", "--stdin", "filter"],
        paths,
        "git check-attr",
    )?;
    // -z output: path NUL attribute NUL value NUL, in input order.
    let fields: Vec<&[u8]> = out.split(|b| *b == 0).collect();
    let values: Vec<bool> = fields
        .chunks(3)
        .filter(|c| c.len() == 3)
        .map(|c| c[2] == b"lfs")
        .collect();
    if values.len() != paths.len() {
        return Err(git_err(
            top,
            "git check-attr",
            format!("answered {} paths of {}", values.len(), paths.len()),
        ));
    }
    Ok(values)
}

/// Appends a `PATTERN filter=lfs ...` line to the top `.gitattributes` for
/// each path not yet covered (temp file and rename: never half-written).
/// Returns whether the file changed.
pub fn track(top: &Path, paths: &[&str]) -> Result<bool, TrackError> {
    let covered = tracked(top, paths)?;
    let missing: Vec<&str> = paths
        .iter()
        .zip(&covered)
        .filter(|(_, c)| !**c)
        .map(|(p, _)| *p)
        .collect();
    if missing.is_empty() {
        return Ok(false);
    }
    let file = top.join(".gitattributes");
    let mut text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(TrackError::Io {
                op: "read",
                path: file,
                source,
            })
        }
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    for path in &missing {
        text.push_str(&format!("{} {LFS_ATTRIBUTES}\n", pattern(path)));
    }
    replace(&file, text.as_bytes())?;
    Ok(true)
}

/// Stages `paths` (and `.gitattributes`) with one `git add`; pathspecs are
/// literal, so a name with `*` or `[` stages only itself.
pub fn stage(top: &Path, paths: &[&str]) -> Result<(), TrackError> {
    let mut all: Vec<&str> = paths.to_vec();
    if top.join(".gitattributes").exists() {
        all.push(".gitattributes");
    }
    let args = [
        "--literal-pathspecs",
        "add",
        "--pathspec-from-file=-",
        "--pathspec-file-nul",
    ];
    run_with_input(top, &args, &all, "git add").map(|_| ())
}

/// `path` as a gitattributes pattern matching exactly it (as git lfs track
/// writes a literal name): glob characters escaped, spaces as `[[:space:]]`.
pub fn pattern(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 8);
    for (i, c) in path.chars().enumerate() {
        match c {
            ' ' => out.push_str("[[:space:]]"),
            '*' | '?' | '[' | ']' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '#' | '!' if i == 0 => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Writes `bytes` to `path` through a temp file in the same folder and a rename.
pub fn replace(path: &Path, bytes: &[u8]) -> Result<(), TrackError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let io = |op: &'static str| {
        move |source| TrackError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io("create a temp file beside"))?;
    tmp.write_all(bytes).map_err(io("write"))?;
    // Work tree files get the usual mode (NamedTempFile makes 0600).
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o644 & !umask());
    std::fs::set_permissions(tmp.path(), mode).map_err(io("set the mode of"))?;
    tmp.persist(path).map_err(|e| TrackError::Io {
        op: "replace",
        path: path.to_path_buf(),
        source: e.error,
    })?;
    Ok(())
}

fn umask() -> u32 {
    // SAFETY: umask only swaps the process's mask; it is put back at once.
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    }
}

/// Runs git in `top` with `input` NUL-separated on its standard input, fed
/// from a thread so a long answer cannot block a long question.
fn run_with_input(
    top: &Path,
    args: &[&str],
    input: &[&str],
    what: &'static str,
) -> Result<Vec<u8>, TrackError> {
    let mut child = Command::new("git")
        .arg("-C")
        .arg(top)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| git_err(top, what, format!("cannot run git: {e}")))?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let mut bytes = Vec::with_capacity(input.iter().map(|p| p.len() + 1).sum());
    for p in input {
        bytes.extend_from_slice(p.as_bytes());
        bytes.push(0);
    }
    let feeder = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child
        .wait_with_output()
        .map_err(|e| git_err(top, what, e.to_string()))?;
    let fed = feeder.join().expect("the feeding thread does not panic");
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(git_err(top, what, why));
    }
    fed.map_err(|e| git_err(top, what, format!("writing its input: {e}")))?;
    Ok(out.stdout)
}

fn git_err(top: &Path, what: &'static str, why: String) -> TrackError {
    TrackError::Git {
        what,
        repo: top.to_path_buf(),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn odd_names_are_tracked_exactly_and_covered_ones_are_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        git(top, &["init", "-q"]);
        std::fs::write(
            top.join(".gitattributes"),
            "*.cram filter=lfs diff=lfs merge=lfs -text",
        )
        .unwrap();
        let paths = ["a b.bam", "d/x[1]*.bam", "#h.bam", "r.cram"];
        assert_eq!(
            tracked(top, &paths).unwrap(),
            vec![false, false, false, true]
        );
        assert!(track(top, &paths).unwrap());
        assert_eq!(tracked(top, &paths).unwrap(), vec![true; 4]);
        // A sibling that only matches as a glob is not swept in.
        assert_eq!(tracked(top, &["d/x1y.bam"]).unwrap(), vec![false]);
        assert!(!track(top, &paths).unwrap(), "nothing left to add");
        let text = std::fs::read_to_string(top.join(".gitattributes")).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(
            text.starts_with("*.cram filter=lfs diff=lfs merge=lfs -text\n"),
            "{text}"
        );
    }
}
