//! Objects the repo's object remote does not hold, read where else they are
//! known to be: the locations of foreign objects of that content in the
//! registry (a `drs://` one resolved through its DRS server), then the
//! records of that sha256 in the repo's Gen3 Indexd. This is how a fresh
//! clone (empty pool, empty registry) of a repo whose objects live only in
//! DRS checks out: Indexd, recorded in the committed `.gitattributes`, names
//! each object's location by its sha256. That Indexd is asked only when the
//! user named its server in `DRSD_DRS_SERVERS` (`indexd.rs`): a cloned repo
//! does not choose where this daemon looks.
//!
//! Every read is checked against the oid on its way into the pool; a place
//! that fails is reported and the next is tried.

use super::{RepoFacts, Transfers};
use crate::blocking;
use crate::pool::Oid;
use crate::remote::{FetchError, PointerFetchError};
use crate::stores::{ObjectUrl, RemoteError, SecretUrl};

/// Whether the object remote does not have the object (as opposed to
/// failing to answer): then the places below are worth a try.
pub(super) fn is_missing(e: &PointerFetchError) -> bool {
    matches!(
        e,
        PointerFetchError::Missing { .. }
            | PointerFetchError::Fetch(FetchError::Remote(RemoteError::Http { status: 404, .. }))
    )
}

impl Transfers {
    /// Fetches `oid` of `size` bytes into the pool from the first place
    /// that has it; `Err` says what was tried and why each failed (`None`
    /// when there was no place to try).
    pub(super) async fn fetch_elsewhere(
        &self,
        facts: &RepoFacts,
        oid: Oid,
        size: u64,
        report: &(dyn Fn(u64) + Sync),
    ) -> Result<(), Option<String>> {
        let mut tried = Vec::new();
        for url in self.places(facts, oid, size, &mut tried).await {
            let Ok(parsed) = ObjectUrl::parse(url.expose()) else {
                continue;
            };
            match self
                .remote
                .fetch_verified(self.pool.clone(), &parsed, oid, size, report)
                .await
            {
                Ok(_) => {
                    log::info!("object {oid}: read from {parsed}");
                    return Ok(());
                }
                Err(e) => tried.push(format!("{parsed}: {e}")),
            }
        }
        Err((!tried.is_empty()).then(|| tried.join("; ")))
    }

    /// Where `oid` may be read, best first: the registry's foreign objects
    /// of that content, then the repo's Indexd's records (an Indexd that
    /// cannot be asked is noted in `tried`).
    async fn places(
        &self,
        facts: &RepoFacts,
        oid: Oid,
        size: u64,
        tried: &mut Vec<String>,
    ) -> Vec<SecretUrl> {
        let registry = self.registry.clone();
        let mut places: Vec<SecretUrl> =
            match blocking(move || registry.objects_of_content(&oid)).await {
                Ok(objects) => objects
                    .into_iter()
                    .filter(|o| o.size == size)
                    .map(|o| o.url)
                    .collect(),
                Err(e) => {
                    log::warn!("object {oid}: reading the registry: {e}");
                    Vec::new()
                }
            };
        let Some(base) = &facts.indexd else {
            return places;
        };
        if let Err(untrusted) = self.trusted_indexd(base) {
            tried.push(untrusted.to_string());
            return places;
        }
        let records = match self.remote.indexd(base) {
            Ok(client) => client.by_sha256(oid).await,
            Err(e) => Err(e),
        };
        match records {
            Ok(records) => places.extend(
                records
                    .into_iter()
                    .filter(|r| r.size.is_none_or(|s| s == size))
                    .flat_map(|r| r.urls)
                    .map(SecretUrl::new),
            ),
            Err(e) => tried.push(format!("Indexd {base}: {e}")),
        }
        places
    }
}
