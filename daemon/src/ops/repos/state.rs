//! The registered repos, kept across restarts in a small JSON file under
//! the state folder, replaced atomically (write a temp file, fsync, rename).
//! A file that cannot be read stops the daemon's start ([`StateError`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::IoError;

const VERSION: u32 = 1;

/// Why the repo book's file could not be read or written, naming it.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("the state file {} {why}; fix or remove it (it lists the registered repos)", path.display())]
    Bad { path: PathBuf, why: String },
    #[error(transparent)]
    Io(#[from] IoError),
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StateFile {
    version: u32,
    repos: Vec<PathBuf>,
}

pub(crate) fn state_file(state_dir: &Path) -> PathBuf {
    state_dir.join("repos.json")
}

/// The repos saved at `path`; none when the file does not exist yet.
pub(crate) fn load(path: &Path) -> Result<Vec<PathBuf>, StateError> {
    let bad = |why: String| StateError::Bad {
        path: path.to_path_buf(),
        why,
    };
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(IoError::new("read", path, e).into()),
    };
    let state: StateFile =
        serde_json::from_slice(&text).map_err(|e| bad(format!("is not valid: {e}")))?;
    if state.version != VERSION {
        return Err(bad(format!(
            "has version {}, this drsd reads {VERSION}",
            state.version
        )));
    }
    Ok(state.repos)
}

pub(crate) fn save(path: &Path, repos: &[PathBuf]) -> Result<(), StateError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    crate::private::dir(dir).map_err(IoError::at("create state folder", dir))?;
    let state = StateFile {
        version: VERSION,
        repos: repos.to_vec(),
    };
    let text = serde_json::to_vec_pretty(&state).expect("paths serialize");
    let mut tmp =
        tempfile::NamedTempFile::new_in(dir).map_err(IoError::at("create temp file in", dir))?;
    tmp.write_all(&text)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(IoError::at("write", tmp.path()))?;
    tmp.persist(path)
        .map_err(|e| IoError::new("replace", path, e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_repos_load_back_and_a_corrupt_file_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let path = state_file(tmp.path());
        assert!(load(&path).unwrap().is_empty());
        let repos = vec![PathBuf::from("/a"), PathBuf::from("/b c")];
        save(&path, &repos).unwrap();
        assert_eq!(load(&path).unwrap(), repos);
        std::fs::write(&path, b"{not json").unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(
            err.contains(&path.display().to_string()) && err.contains("not valid"),
            "{err}"
        );
    }
}
