//! Rows an older drsd wrote before the team's database held URLs redacted
//! (`secrets.rs`): a URL with its user-info or signing parameters, a job's
//! error quoting one. At each start, before the node serves, they are
//! redacted, so an upgrade leaves no secret where every member reads.
//!
//! An object's row this node's repos point at is this node's to redact:
//! the whole URL goes to its private store first, and the node is marked a
//! holder (only holders claim the object's job). A row no node points at
//! is redacted too (nothing needs its URL). A row only other nodes point at
//! is left to them, which do the same at their own start: redacting it
//! here would lose the one copy of a URL they need.
//!
//! A row whose redacted URL an upgraded node recorded already (the same
//! object added again since) is merged into that row: its paths, holders
//! and job move there, what it knew of the content too, and it goes.

use postgres::Transaction;

use super::secrets::{shared, PrivateUrls};
use super::PgRegistry;
use crate::registry::RegistryError;

/// One advisory lock key for the redaction: two nodes starting at once
/// take turns (the pool engines' DDL takes another).
const REDACTING: i64 = 7_120_944;

/// An object row holding a secret, as read.
struct OldRow {
    id: i64,
    url: String,
    etag: String,
    size: i64,
    /// This node's repos point at it.
    ours: bool,
}

/// What the redaction did, for the log.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Redacted {
    pub urls: usize,
    pub errors: usize,
    /// Rows left to the other nodes that point at them.
    pub theirs: usize,
}

impl PgRegistry {
    /// Redacts what older nodes wrote whole (see the module's notes).
    pub(super) fn redact_old_rows(&self) -> Result<Redacted, RegistryError> {
        let (node, urls) = (self.node.name.clone(), &self.urls);
        let done = self.tx("redact the URLs older nodes wrote whole", |tx| {
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&REDACTING])?;
            redact(tx, &node, urls)
        })?;
        if done != Redacted::default() {
            log::info!(
                "the team's database: {} URL(s) and {} job error(s) older nodes wrote with \
                 their secrets redacted; {} left to the other nodes that use them (redacted \
                 at their next start)",
                done.urls,
                done.errors,
                done.theirs
            );
        }
        Ok(done)
    }
}

/// The redaction, in the caller's transaction.
fn redact(
    tx: &mut Transaction<'_>,
    node: &str,
    urls: &PrivateUrls,
) -> Result<Redacted, postgres::Error> {
    let mut done = Redacted::default();
    for row in old_rows(tx, node)? {
        let shown = shared(&row.url);
        if shown == row.url {
            continue; // a `?` or `@` holding no secret
        }
        let others = pointed_at_by_others(tx, row.id, node)?;
        if !row.ours && others {
            done.theirs += 1;
            continue;
        }
        if row.ours {
            // Kept privately before the shared copy goes: a failure here
            // leaves the row as it was.
            if let Err(e) = urls.keep(&row.url) {
                log::warn!("keeping a URL whole in this node's private store: {e}");
                continue;
            }
        }
        let id = move_to_shared_form(tx, &row, &shown)?;
        if row.ours {
            tx.execute(
                "INSERT INTO drsd_reg_url_holders (object_id, node) VALUES ($1, $2)
                 ON CONFLICT DO NOTHING",
                &[&id, &node],
            )?;
        }
        done.urls += 1;
    }
    done.errors = redact_errors(tx)?;
    Ok(done)
}

/// Rows whose URL may hold a secret (user-info, a query, a fragment); one
/// an upgraded node wrote (redacted whole: it shows `REDACTED`) is not.
fn old_rows(tx: &mut Transaction<'_>, node: &str) -> Result<Vec<OldRow>, postgres::Error> {
    let rows = tx.query(
        "SELECT o.id, o.url, o.etag, o.size, EXISTS (SELECT 1 FROM drsd_reg_repo_refs r
                WHERE r.object_id = o.id AND r.node = $1)
         FROM drsd_reg_objects o
         WHERE (o.url LIKE '%@%' OR o.url LIKE '%?%' OR o.url LIKE '%#%')
            AND o.url NOT LIKE '%REDACTED%'
         ORDER BY o.id",
        &[&node],
    )?;
    rows.iter()
        .map(|r| {
            Ok(OldRow {
                id: r.try_get(0)?,
                url: r.try_get(1)?,
                etag: r.try_get(2)?,
                size: r.try_get(3)?,
                ours: r.try_get(4)?,
            })
        })
        .collect()
}

fn pointed_at_by_others(
    tx: &mut Transaction<'_>,
    id: i64,
    node: &str,
) -> Result<bool, postgres::Error> {
    let row = tx.query_one(
        "SELECT EXISTS (SELECT 1 FROM drsd_reg_repo_refs WHERE object_id = $1 AND node <> $2)",
        &[&id, &node],
    )?;
    row.try_get(0)
}

/// The row under its URL's shared form `shown`: renamed, or merged into
/// the row recorded under that form already. Returns the row's id.
fn move_to_shared_form(
    tx: &mut Transaction<'_>,
    row: &OldRow,
    shown: &str,
) -> Result<i64, postgres::Error> {
    let twin = tx.query_opt(
        "SELECT id FROM drsd_reg_objects WHERE url = $1 AND etag = $2 AND size = $3",
        &[&shown, &row.etag, &row.size],
    )?;
    let Some(twin) = twin else {
        tx.execute(
            "UPDATE drsd_reg_objects SET url = $2 WHERE id = $1",
            &[&row.id, &shown],
        )?;
        return Ok(row.id);
    };
    let keep: i64 = twin.try_get(0)?;
    merge(tx, row.id, keep)?;
    Ok(keep)
}

/// Moves what points at row `old` to row `keep`, and removes `old`.
fn merge(tx: &mut Transaction<'_>, old: i64, keep: i64) -> Result<(), postgres::Error> {
    tx.execute(
        "UPDATE drsd_reg_objects k SET
            content_oid = COALESCE(k.content_oid, o.content_oid),
            content_read = k.content_read OR (k.content_oid IS NULL AND o.content_read),
            md5 = COALESCE(k.md5, o.md5),
            drs_id = COALESCE(k.drs_id, o.drs_id),
            recorded_at = LEAST(k.recorded_at, o.recorded_at)
         FROM drsd_reg_objects o WHERE k.id = $2 AND o.id = $1",
        &[&old, &keep],
    )?;
    tx.execute(
        "UPDATE drsd_reg_repo_refs SET object_id = $2 WHERE object_id = $1",
        &[&old, &keep],
    )?;
    tx.execute(
        "INSERT INTO drsd_reg_url_holders (object_id, node)
         SELECT $2, node FROM drsd_reg_url_holders WHERE object_id = $1
         ON CONFLICT DO NOTHING",
        &[&old, &keep],
    )?;
    tx.execute(
        "DELETE FROM drsd_reg_url_holders WHERE object_id = $1",
        &[&old],
    )?;
    // The kept row's job wins; the old one's moves only where there is none.
    tx.execute(
        "UPDATE drsd_reg_jobs SET object_id = $2 WHERE object_id = $1
            AND NOT EXISTS (SELECT 1 FROM drsd_reg_jobs WHERE object_id = $2)",
        &[&old, &keep],
    )?;
    tx.execute("DELETE FROM drsd_reg_jobs WHERE object_id = $1", &[&old])?;
    tx.execute("DELETE FROM drsd_reg_objects WHERE id = $1", &[&old])?;
    Ok(())
}

/// Job errors quoting a URL's secrets (an older node's), redacted.
fn redact_errors(tx: &mut Transaction<'_>) -> Result<usize, postgres::Error> {
    let rows = tx.query(
        "SELECT object_id, error FROM drsd_reg_jobs WHERE error LIKE '%://%'",
        &[],
    )?;
    let mut n = 0;
    for row in rows {
        let (id, error): (i64, String) = (row.try_get(0)?, row.try_get(1)?);
        let shown = crate::stores::redact_text(&error);
        if shown != error {
            tx.execute(
                "UPDATE drsd_reg_jobs SET error = $2 WHERE object_id = $1",
                &[&id, &shown],
            )?;
            n += 1;
        }
    }
    Ok(n)
}
