//! [`PgRegistry`]'s first room: the foreign objects (shared by every node)
//! and this node's repos' paths pointing at them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use postgres::Transaction;

use super::rows::{big, entry_of, object_at, OidText, OBJECT_COLUMNS};
use super::PgRegistry;
use crate::pool::Oid;
use crate::registry::engine::ForeignObjects;
use crate::registry::{now, Entry, ForeignObject, RegistryError};

/// Inserts the object or updates what is known of it; returns its id. As
/// SQLite's: a known content oid, md5, DRS id and version stay, and the
/// earliest `recorded_at` wins.
const UPSERT_OBJECT: &str = "
    INSERT INTO drsd_reg_objects AS o (url, bucket, key, version_id, etag, size, provisional_oid,
        content_oid, drs_id, last_modified, recorded_at, updated_at, md5, content_read)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13)
    ON CONFLICT (url, etag, size) DO UPDATE SET
        content_read = CASE WHEN excluded.content_read AND (o.content_oid IS NULL
            OR o.content_oid = excluded.content_oid) THEN true ELSE o.content_read END,
        content_oid = COALESCE(o.content_oid, excluded.content_oid),
        md5 = COALESCE(o.md5, excluded.md5),
        drs_id = COALESCE(o.drs_id, excluded.drs_id),
        version_id = COALESCE(o.version_id, excluded.version_id),
        recorded_at = LEAST(o.recorded_at, excluded.recorded_at)
    RETURNING id";

/// Upserts `o` under `url`, its shared form (`secrets.rs`).
fn upsert_object(
    tx: &mut Transaction<'_>,
    o: &ForeignObject,
    url: &str,
) -> Result<i64, postgres::Error> {
    let stmt = tx.prepare(UPSERT_OBJECT)?;
    let row = tx.query_one(
        &stmt,
        &[
            &url,
            &o.bucket,
            &o.key,
            &o.version_id,
            &o.etag,
            &big(o.size),
            &o.provisional_oid.to_hex(),
            &o.content_oid.map(|c| c.to_hex()),
            &o.drs_id,
            &o.last_modified,
            &big(o.recorded_at),
            &o.md5,
            &o.content_read,
        ],
    )?;
    row.try_get(0)
}

/// Repos are keyed by their top folder as the daemon registers it.
pub(super) fn repo_key(repo: &Path) -> String {
    repo.to_string_lossy().into_owned()
}

/// Marks node `node` as one holding object `id`'s URL whole.
const HOLDS_URL: &str = "INSERT INTO drsd_reg_url_holders (object_id, node) VALUES ($1, $2)
    ON CONFLICT DO NOTHING";

impl PgRegistry {
    /// The URLs of `entries` as the team's database is to hold them, each
    /// whole one kept in this node's private store first; and whether each
    /// held a secret.
    fn share_urls<'e>(
        &self,
        objects: impl Iterator<Item = &'e ForeignObject>,
    ) -> Result<Vec<(String, bool)>, RegistryError> {
        objects.map(|o| self.urls.keep(o.url.expose())).collect()
    }

    /// `object` with its URL whole again, when this node was given it so.
    pub(super) fn reveal(&self, mut object: ForeignObject) -> Result<ForeignObject, RegistryError> {
        let shown = object.url.expose().to_string();
        object.url = self.urls.whole(shown)?.into();
        Ok(object)
    }

    /// [`PgRegistry::reveal`] for entries.
    fn reveal_entries(&self, entries: Vec<Entry>) -> Result<Vec<Entry>, RegistryError> {
        entries
            .into_iter()
            .map(|e| {
                Ok(Entry {
                    object: self.reveal(e.object)?,
                    ..e
                })
            })
            .collect()
    }

    /// Entries of this node's `repo` chosen by `filter` (SQL over `r` and
    /// `o`, `$3` onwards its parameters), by path.
    fn entries_where(
        &self,
        op: &'static str,
        repo: &Path,
        filter: &str,
        more: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Entry>, RegistryError> {
        let query = format!(
            "SELECT r.path, r.oid, {OBJECT_COLUMNS} FROM drsd_reg_repo_refs r
             JOIN drsd_reg_objects o ON o.id = r.object_id
             WHERE r.node = $1 AND r.repo = $2 AND ({filter}) ORDER BY r.path"
        );
        let (node, key) = (self.node.name.as_str(), repo_key(repo));
        let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![&node, &key];
        params.extend_from_slice(more);
        let entries = self.tx(op, |tx| {
            tx.query(&query, &params)?.iter().map(entry_of).collect()
        })?;
        self.reveal_entries(entries)
    }
}

impl ForeignObjects for PgRegistry {
    fn record(&self, repo: &Path, entries: &[Entry]) -> Result<(), RegistryError> {
        let key = repo_key(repo);
        let urls = self.share_urls(entries.iter().map(|e| &e.object))?;
        self.tx("record", |tx| {
            let refs = tx.prepare(
                "INSERT INTO drsd_reg_repo_refs (node, repo, path, oid, object_id, added_at)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (node, repo, path) DO UPDATE SET oid = excluded.oid,
                    object_id = excluded.object_id, added_at = excluded.added_at",
            )?;
            for (entry, (url, secret)) in entries.iter().zip(&urls) {
                let id = upsert_object(tx, &entry.object, url)?;
                if *secret {
                    tx.execute(HOLDS_URL, &[&id, &self.node.name])?;
                }
                tx.execute(
                    &refs,
                    &[
                        &self.node.name,
                        &key,
                        &entry.path,
                        &entry.oid.to_hex(),
                        &id,
                        &big(now()),
                    ],
                )?;
            }
            Ok(())
        })
    }

    fn restore(&self, repo: &Path, entries: &[Entry]) -> Result<usize, RegistryError> {
        let key = repo_key(repo);
        let urls = self.share_urls(entries.iter().map(|e| &e.object))?;
        self.tx("restore", |tx| {
            let refs = tx.prepare(
                "INSERT INTO drsd_reg_repo_refs (node, repo, path, oid, object_id, added_at)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (node, repo, path) DO NOTHING",
            )?;
            let mut restored = 0;
            for (entry, (url, secret)) in entries.iter().zip(&urls) {
                let id = upsert_object(tx, &entry.object, url)?;
                if *secret {
                    tx.execute(HOLDS_URL, &[&id, &self.node.name])?;
                }
                restored += tx.execute(
                    &refs,
                    &[
                        &self.node.name,
                        &key,
                        &entry.path,
                        &entry.oid.to_hex(),
                        &id,
                        &big(entry.object.recorded_at),
                    ],
                )? as usize;
            }
            Ok(restored)
        })
    }

    fn lookup_by_location(
        &self,
        url: &str,
        etag: &str,
        size: u64,
    ) -> Result<Option<ForeignObject>, RegistryError> {
        let query = format!(
            "SELECT {OBJECT_COLUMNS} FROM drsd_reg_objects o
             WHERE url = $1 AND etag = $2 AND size = $3"
        );
        let url = super::secrets::shared(url);
        let found = self.tx("look up", |tx| {
            tx.query_opt(&query, &[&url, &etag, &big(size)])?
                .map(|r| object_at(&r, 0))
                .transpose()
        })?;
        found.map(|o| self.reveal(o)).transpose()
    }

    fn objects_of_content(&self, oid: &Oid) -> Result<Vec<ForeignObject>, RegistryError> {
        let query = format!(
            "SELECT {OBJECT_COLUMNS} FROM drsd_reg_objects o
             WHERE content_oid = $1 ORDER BY updated_at DESC, id DESC"
        );
        let found = self.tx("look up by content", |tx| {
            tx.query(&query, &[&oid.to_hex()])?
                .iter()
                .map(|r| object_at(r, 0))
                .collect::<Result<Vec<_>, _>>()
        })?;
        found.into_iter().map(|o| self.reveal(o)).collect()
    }

    /// The update locks the object's row, so a repo recording it at the
    /// same time either commits before (and is listed) or reads the
    /// content oid after.
    fn set_content_oid(
        &self,
        url: &str,
        etag: &str,
        size: u64,
        content_oid: &Oid,
    ) -> Result<Vec<PathBuf>, RegistryError> {
        let url = super::secrets::shared(url);
        let url = url.as_str();
        self.tx("set the content oid", |tx| {
            tx.execute(
                "UPDATE drsd_reg_objects SET content_oid = $4, updated_at = $5
                 WHERE url = $1 AND etag = $2 AND size = $3",
                &[&url, &etag, &big(size), &content_oid.to_hex(), &big(now())],
            )?;
            let rows = tx.query(
                "SELECT DISTINCT r.repo FROM drsd_reg_repo_refs r
                 JOIN drsd_reg_objects o ON o.id = r.object_id
                 WHERE r.node = $4 AND o.url = $1 AND o.etag = $2 AND o.size = $3",
                &[&url, &etag, &big(size), &self.node.name],
            )?;
            rows.iter()
                .map(|r| r.try_get::<_, String>(0).map(PathBuf::from))
                .collect()
        })
    }

    fn for_repo(&self, repo: &Path) -> Result<Vec<Entry>, RegistryError> {
        self.entries_where("list a repo", repo, "true", &[])
    }

    fn entries_at(&self, repo: &Path, paths: &[&str]) -> Result<Vec<Entry>, RegistryError> {
        let wanted: Vec<&str> = paths.to_vec();
        let found = self.entries_where("look up paths", repo, "r.path = ANY($3)", &[&wanted])?;
        // In the order asked.
        let mut by_path: HashMap<String, Entry> =
            found.into_iter().map(|e| (e.path.clone(), e)).collect();
        Ok(paths.iter().filter_map(|p| by_path.remove(*p)).collect())
    }

    fn provisional_for_repo(&self, repo: &Path) -> Result<Vec<Entry>, RegistryError> {
        self.entries_where(
            "list a repo's provisional pointers",
            repo,
            "o.content_oid IS NULL OR o.content_oid != r.oid",
            &[],
        )
    }

    fn hashed(&self) -> Result<HashMap<Oid, Oid>, RegistryError> {
        self.tx("list hashed objects", |tx| {
            let rows = tx.query(
                "SELECT provisional_oid, content_oid FROM drsd_reg_objects
                 WHERE content_oid IS NOT NULL",
                &[],
            )?;
            rows.iter()
                .map(|r| Ok((r.try_get::<_, OidText>(0)?.0, r.try_get::<_, OidText>(1)?.0)))
                .collect()
        })
    }

    fn counts(&self) -> Result<(u64, u64), RegistryError> {
        self.tx("count", |tx| {
            let row = tx.query_one(
                "SELECT count(*), count(content_oid) FROM drsd_reg_objects",
                &[],
            )?;
            Ok((
                row.try_get::<_, i64>(0)? as u64,
                row.try_get::<_, i64>(1)? as u64,
            ))
        })
    }
}
