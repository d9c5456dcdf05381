//! Promotion: rewriting provisional pointers (oid from an ETag) into content
//! pointers (oid = sha256 of the bytes) once the bytes were hashed, in the
//! index and in the work tree, never in a commit: the user commits.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::scan::{git, read_pointers};
use super::track::{replace, stage, TrackError};
use super::Pointer;

/// One path to rewrite from one pointer to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    /// Relative to the repo's top, `/`-separated.
    pub path: String,
    pub from: Pointer,
    pub to: Pointer,
}

/// Which staged pointers to rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only those not committed yet (HEAD has another blob at the path):
    /// what the daemon does on its own as soon as an object is hashed.
    Uncommitted,
    /// Committed ones too: `drsctl promote`, the user then commits.
    All,
}

/// What [`promote`] did with each path asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Promoted {
    pub rewritten: Vec<String>,
    /// Committed, and the scope was [`Scope::Uncommitted`].
    pub committed: Vec<String>,
    /// The index or the work tree holds something else than the old pointer
    /// (the user changed it): left alone.
    pub changed: Vec<String>,
}

/// Rewrites each path whose index entry is its `from` pointer: the work-tree
/// file (when it still holds that pointer) through a temp file and a rename,
/// then the index entry, staged as `git add` would.
pub fn promote(top: &Path, rewrites: &[Rewrite], scope: Scope) -> Result<Promoted, TrackError> {
    let mut done = Promoted::default();
    if rewrites.is_empty() {
        return Ok(done);
    }
    let index = blobs(top, &["ls-files", "-s", "-z"])?;
    let head = match scope {
        Scope::Uncommitted => blobs(top, &["ls-tree", "-r", "-z", "HEAD"]).unwrap_or_default(),
        Scope::All => BTreeMap::new(),
    };
    let wanted: Vec<String> = rewrites
        .iter()
        .filter_map(|r| index.get(&r.path).cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let pointers = read_pointers(top, &wanted).map_err(|e| TrackError::Git {
        what: "git cat-file",
        repo: top.to_path_buf(),
        why: e.to_string(),
    })?;
    let mut ready = Vec::new();
    for r in rewrites {
        let blob = index.get(&r.path);
        let staged = blob.and_then(|b| pointers.get(b));
        if staged != Some(&r.from) {
            done.changed.push(r.path.clone());
            continue;
        }
        if scope == Scope::Uncommitted && head.get(&r.path) == blob {
            done.committed.push(r.path.clone());
            continue;
        }
        let file = top.join(&r.path);
        if std::fs::read(&file).ok() != Some(r.from.to_text().into_bytes()) {
            done.changed.push(r.path.clone());
            continue;
        }
        replace(&file, r.to.to_text().as_bytes())?;
        ready.push(r.path.as_str());
    }
    stage(top, &ready)?;
    done.rewritten = ready.into_iter().map(str::to_string).collect();
    Ok(done)
}

/// `path -> blob id` from `git ls-files -s -z` or `git ls-tree -r -z`
/// (`<mode> SP <id or type SP id> ... TAB <path>`).
fn blobs(top: &Path, args: &[&str]) -> Result<BTreeMap<String, String>, TrackError> {
    let out = git(top).args(args).output().map_err(|e| TrackError::Git {
        what: "git ls-files",
        repo: top.to_path_buf(),
        why: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(TrackError::Git {
            what: "git ls-files",
            repo: top.to_path_buf(),
            why: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let mut map = BTreeMap::new();
    for entry in out.stdout.split(|b| *b == 0) {
        let text = String::from_utf8_lossy(entry);
        let Some((meta, path)) = text.split_once('\t') else {
            continue;
        };
        // ls-files: "mode id stage"; ls-tree: "mode type id".
        let id = meta
            .split_ascii_whitespace()
            .find(|f| f.len() >= 40 && f.bytes().all(|b| b.is_ascii_hexdigit()));
        if let Some(id) = id {
            map.insert(path.to_string(), id.to_string());
        }
    }
    Ok(map)
}
