//! A repo's foreign-object entries put back from its mirror
//! (`<git common dir>/lfs/foreign/registry.jsonl`) when the registry lacks
//! them: the daemon's state was lost, or the registry file alone. Then the
//! objects among them already hashed are promoted and hydrated there
//! ([`ForeignObjects::catch_up`]), as the workers would have done.

use std::path::Path;

use super::{ForeignError, ForeignObjects};
use crate::git::Repo;
use crate::registry::mirror;

impl ForeignObjects {
    /// Puts back the entries `repo`'s mirror lists and the registry lacks
    /// (what the registry has wins), then catches up with the hashed ones.
    pub async fn restore(&self, repo: &Path) -> Result<(), ForeignError> {
        let (registry, at) = (self.registry.clone(), repo.to_path_buf());
        let restored = crate::blocking(move || {
            let file = mirror::path_in(&Repo::locate(&at)?.common_dir);
            let entries = mirror::read(&file)?;
            Ok::<_, ForeignError>(registry.restore(&at, &entries)?)
        })
        .await?;
        if restored > 0 {
            log::info!(
                "restored {restored} registry entries of {} from its mirror",
                repo.display()
            );
        }
        self.catch_up(repo).await;
        Ok(())
    }
}
