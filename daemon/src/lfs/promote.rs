//! Promotion: rewriting provisional pointers (oid from an ETag) into content
//! pointers (oid = sha256 of the bytes) once the bytes were hashed, in the
//! index and in the work tree, never in a commit: the user commits.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::scan::read_pointers;
use super::track::{attributes, replace, stage, Convert, TrackError};
use super::Pointer;
use crate::git::git;

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
    /// Holding the new pointer already (promoted by the workers, or by an
    /// earlier run cut short before the registry learnt it): nothing to
    /// commit, so not reported as rewritten, but the registry still learns.
    pub already: Vec<String>,
    /// Committed, and the scope was [`Scope::Uncommitted`].
    pub committed: Vec<String>,
    /// The index or the work tree holds something else than the old pointer
    /// (the user changed it): left alone.
    pub changed: Vec<String>,
}

/// Rewrites each path whose index entry is its `from` pointer: the work-tree
/// file (when it still holds that pointer) through a temp file and a rename,
/// then the index entry, staged as `git add` would. Restartable: a path whose
/// work-tree file holds exactly the `to` pointer while its index entry is
/// still `from` (an earlier run cut after the write) is staged, not refused.
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
        if staged == Some(&r.to) && holds(top, &r.path, &r.to) {
            // Promoted already (by the workers, or an earlier run cut short
            // before the registry learnt it): done, not a change.
            done.already.push(r.path.clone());
            continue;
        }
        if staged != Some(&r.from) {
            done.changed.push(r.path.clone());
            continue;
        }
        if holds(top, &r.path, &r.to) {
            // Half done: a promotion cut between its work-tree write and its
            // staging (git's index held past the wait, a kill -9) left these
            // exact bytes; only the staging is missing, whatever the scope
            // (only a promotion the scope allowed wrote them). Bytes the
            // user changed in any way do not match and are left alone.
            ready.push(r.path.as_str());
            continue;
        }
        if scope == Scope::Uncommitted && head.get(&r.path) == blob {
            done.committed.push(r.path.clone());
            continue;
        }
        if !holds(top, &r.path, &r.from) {
            done.changed.push(r.path.clone());
            continue;
        }
        replace(top, &r.path, r.to.to_text().as_bytes())?;
        ready.push(r.path.as_str());
    }
    // Pointers whose attributes change nothing (every path add-url tracked,
    // unless the user added an encoding or ident) are staged as they are:
    // git then matches none of them against .gitattributes' lines.
    let attrs = attributes(top, &ready)?;
    let pick = |as_is: bool| -> Vec<&str> {
        let both = ready.iter().zip(&attrs);
        both.filter(|(_, a)| a.pointer_as_is == as_is)
            .map(|(p, _)| *p)
            .collect()
    };
    stage(top, &pick(true), Convert::AsIs)?;
    stage(top, &pick(false), Convert::ByAttributes)?;
    done.rewritten = ready.into_iter().map(str::to_string).collect();
    Ok(done)
}

/// Whether the work-tree file at `rel` is a regular file holding `pointer`,
/// reached through no symlink (one planted there is the user's change, or
/// an attack: left alone either way).
fn holds(top: &Path, rel: &str, pointer: &Pointer) -> bool {
    let rel = Path::new(rel);
    let parent = rel.parent().unwrap_or(Path::new(""));
    let file = top.join(rel);
    crate::safe_write::check_dirs(top, parent).is_ok()
        && std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file())
        && std::fs::read(&file).ok() == Some(pointer.to_text().into_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::Oid;

    fn git_ok(top: &Path, args: &[&str]) {
        let out = git(top).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn staged_pointer(top: &Path, rel: &str, p: &Pointer) {
        std::fs::write(top.join(rel), p.to_text()).unwrap();
        stage(top, &[rel], Convert::ByAttributes).unwrap();
    }

    /// A provisional pointer and the content pointer it becomes.
    fn etag_and_body() -> (Pointer, Pointer) {
        let at = |oid| Pointer { oid, size: 4 };
        (at(Oid::of(b"etag")), at(Oid::of(b"body")))
    }

    #[test]
    fn a_pointer_promoted_already_is_reported_already_not_rewritten_nor_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        git_ok(top, &["init", "-q"]);
        let (from, to) = etag_and_body();
        staged_pointer(top, "p.bin", &from);
        let rewrite = Rewrite {
            path: "p.bin".into(),
            from,
            to,
        };
        let first = promote(top, std::slice::from_ref(&rewrite), Scope::All).unwrap();
        assert_eq!(first.rewritten, vec!["p.bin".to_string()]);
        // The other path (workers, or `drsctl promote`) comes second.
        let second = promote(top, &[rewrite], Scope::All).unwrap();
        assert!(second.rewritten.is_empty(), "nothing changed: {second:?}");
        assert_eq!(second.already, vec!["p.bin".to_string()]);
        assert!(second.changed.is_empty(), "{second:?}");
        assert_eq!(
            std::fs::read(top.join("p.bin")).unwrap(),
            to.to_text().as_bytes()
        );
    }

    fn staged_text(top: &Path, rel: &str) -> String {
        let out = git(top)
            .args(["show", &format!(":{rel}")])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn a_promotion_cut_by_a_held_index_lock_is_finished_by_the_next_run() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        git_ok(top, &["init", "-q"]);
        let (from, to) = etag_and_body();
        staged_pointer(top, "p.bin", &from);
        let rewrite = Rewrite {
            path: "p.bin".into(),
            from,
            to,
        };
        // Another git holds the index past the wait: the work tree is
        // written, the staging fails.
        let lock = top.join(".git/index.lock");
        std::fs::write(&lock, b"").unwrap();
        let cut = promote(top, std::slice::from_ref(&rewrite), Scope::All);
        assert!(cut.is_err(), "{cut:?}");
        assert_eq!(
            std::fs::read(top.join("p.bin")).unwrap(),
            to.to_text().as_bytes()
        );
        assert_eq!(staged_text(top, "p.bin"), from.to_text());
        std::fs::remove_file(&lock).unwrap();
        let again = promote(top, &[rewrite], Scope::All).unwrap();
        assert_eq!(again.rewritten, vec!["p.bin".to_string()], "{again:?}");
        assert!(again.changed.is_empty(), "{again:?}");
        assert_eq!(staged_text(top, "p.bin"), to.to_text());
    }

    #[test]
    fn a_committed_pointer_left_half_promoted_by_a_kill_is_staged_by_the_daemon_too() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        git_ok(top, &["init", "-q"]);
        let (from, to) = etag_and_body();
        staged_pointer(top, "p.bin", &from);
        git_ok(
            top,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "provisional",
            ],
        );
        // What `drsctl promote` killed after its write leaves.
        std::fs::write(top.join("p.bin"), to.to_text()).unwrap();
        let rewrite = Rewrite {
            path: "p.bin".into(),
            from,
            to,
        };
        let done = promote(top, &[rewrite], Scope::Uncommitted).unwrap();
        assert_eq!(done.rewritten, vec!["p.bin".to_string()], "{done:?}");
        assert_eq!(staged_text(top, "p.bin"), to.to_text());
    }

    #[test]
    fn a_file_changed_by_the_user_after_a_cut_promotion_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        git_ok(top, &["init", "-q"]);
        let (from, to) = etag_and_body();
        staged_pointer(top, "p.bin", &from);
        // The content pointer, then an edit: one byte more is the user's.
        let edited = format!("{}\n", to.to_text());
        std::fs::write(top.join("p.bin"), &edited).unwrap();
        let rewrite = Rewrite {
            path: "p.bin".into(),
            from,
            to,
        };
        let done = promote(top, &[rewrite], Scope::All).unwrap();
        assert_eq!(done.changed, vec!["p.bin".to_string()], "{done:?}");
        assert_eq!(std::fs::read_to_string(top.join("p.bin")).unwrap(), edited);
        assert_eq!(staged_text(top, "p.bin"), from.to_text());
    }

    #[test]
    fn a_symlink_planted_at_a_staged_pointer_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let (top, outside) = (tmp.path().join("repo"), tmp.path().join("outside"));
        std::fs::create_dir_all(&top).unwrap();
        git_ok(&top, &["init", "-q"]);
        let (from, to) = etag_and_body();
        staged_pointer(&top, "p.bin", &from);
        std::fs::write(&outside, from.to_text()).unwrap();
        std::fs::remove_file(top.join("p.bin")).unwrap();
        std::os::unix::fs::symlink(&outside, top.join("p.bin")).unwrap();
        let rewrite = Rewrite {
            path: "p.bin".into(),
            from,
            to,
        };
        let done = promote(&top, &[rewrite], Scope::All).unwrap();
        assert_eq!(done.changed, vec!["p.bin".to_string()]);
        assert_eq!(std::fs::read(&outside).unwrap(), from.to_text().as_bytes());
    }
}
