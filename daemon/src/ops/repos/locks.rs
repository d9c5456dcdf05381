//! One lock per repo, held by every writer of a repo's `.gitattributes`,
//! pointer files, index and mirror (add-url's write phase, both promotion
//! paths, hydration, the mirror's rewrites): each of them reads the file,
//! changes it and writes it back whole, so two at once lose one's change
//! (a `.gitattributes` line, a promoted pointer). Keyed by the canonical
//! top of the work tree; an entry goes when its last holder does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::lock::lock;
use tokio::sync::OwnedMutexGuard;

type Gate = tokio::sync::Mutex<()>;

#[derive(Default)]
pub struct RepoLocks(Mutex<HashMap<PathBuf, Weak<Gate>>>);

/// Held while writing in one repo; dropping it lets the next writer in.
pub type RepoGuard = OwnedMutexGuard<()>;

impl RepoLocks {
    /// Waits for the repo at `top` (its canonical top folder) to be free.
    pub async fn lock(&self, top: &Path) -> RepoGuard {
        self.gate(top).lock_owned().await
    }

    fn gate(&self, top: &Path) -> Arc<Gate> {
        let mut map = lock(&self.0);
        map.retain(|_, weak| weak.strong_count() > 0);
        if let Some(gate) = map.get(top).and_then(Weak::upgrade) {
            return gate;
        }
        let gate = Arc::new(Gate::default());
        map.insert(top.to_path_buf(), Arc::downgrade(&gate));
        gate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_repo_is_one_writer_at_a_time_and_two_repos_are_not() {
        let locks = RepoLocks::default();
        let a = locks.lock(Path::new("/r/a")).await;
        // Another repo is not held up.
        let b = locks.lock(Path::new("/r/b")).await;
        let waiting = locks.lock(Path::new("/r/a"));
        tokio::pin!(waiting);
        let wait = tokio::time::timeout(std::time::Duration::from_millis(50), &mut waiting);
        assert!(wait.await.is_err(), "a second writer of /r/a waits");
        drop(a);
        let again = tokio::time::timeout(std::time::Duration::from_secs(5), waiting);
        assert!(again.await.is_ok(), "and gets in once the first is done");
        drop(b);
        assert!(locks.0.lock().unwrap().len() <= 2);
    }
}
