//! What of a URL stays with the node: every member of a lab reads the
//! team's database (one role), so a URL's secrets (user-info, a signed
//! query: `X-Amz-Signature`, `X-Amz-Credential`, a `token`) never go there.
//! The database holds the URL as logs show it ([`crate::stores::redacted`]:
//! each secret replaced by `REDACTED`), and the node that was given the
//! whole URL keeps it in its own state folder ([`PrivateUrls`], a SQLite
//! file, 0600 in the 0700 state folder), keyed by that shared form, which
//! the redaction makes the same for the same URL every time.
//!
//! Only a node holding a URL whole can fetch its object: the object's row
//! gets a row per such node in `drsd_reg_url_holders`, and a claim takes
//! the job of an object with holders only on one of them (`queue.rs`).
//!
//! The same private file holds what this node hashed itself (by the
//! object's provisional oid and size): a content oid in the team's
//! database is another member's word, which a node with
//! `team_trust_members = false` does not take where the source gives no
//! checksum of its own (`ops::foreign::promotion`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension};

use crate::pool::Oid;
use crate::registry::RegistryError;
use crate::IoError;

/// The form of `url` the team's database holds: its secrets replaced.
pub(super) fn shared(url: &str) -> String {
    crate::stores::redacted(url)
}

/// The private store's tables: the URLs whole, by their shared form, and
/// the content oid this node's own fetches gave each object.
const TABLES: &str = "
    CREATE TABLE IF NOT EXISTS urls (shared TEXT PRIMARY KEY, url TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS hashed_here (
        provisional TEXT NOT NULL,
        size INTEGER NOT NULL,
        content TEXT NOT NULL,
        PRIMARY KEY (provisional, size)
    );";

/// This node's URLs whole, by their shared form, and the objects it hashed
/// itself.
pub struct PrivateUrls {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl PrivateUrls {
    /// The store at `path` (created 0600, its folder 0700, when missing).
    pub fn open(path: &Path) -> Result<PrivateUrls, RegistryError> {
        if let Some(dir) = path.parent() {
            crate::private::dir(dir).map_err(IoError::at("create the private folder of", path))?;
        }
        crate::private::sqlite(path).map_err(IoError::at("make private", path))?;
        let conn = Connection::open(path).map_err(sql(path, "open"))?;
        conn.execute_batch(&format!("PRAGMA journal_mode = WAL; {TABLES}"))
            .map_err(sql(path, "create its tables"))?;
        Ok(PrivateUrls {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        })
    }

    /// A store that lasts as long as the process: for tests.
    #[cfg(test)]
    pub fn in_memory() -> PrivateUrls {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(TABLES).unwrap();
        PrivateUrls {
            path: PathBuf::from(":memory:"),
            conn: Mutex::new(conn),
        }
    }

    /// Keeps `url` whole when its shared form differs (it holds a secret);
    /// returns the shared form, and whether it held one. The latest URL
    /// given wins: a URL signed again replaces an expired signature.
    pub(super) fn keep(&self, url: &str) -> Result<(String, bool), RegistryError> {
        let shown = shared(url);
        if shown == url {
            return Ok((shown, false));
        }
        crate::lock::lock(&self.conn)
            .execute(
                "INSERT INTO urls (shared, url) VALUES (?1, ?2)
                 ON CONFLICT (shared) DO UPDATE SET url = excluded.url",
                [&shown, url],
            )
            .map_err(sql(&self.path, "keep a URL"))?;
        Ok((shown, true))
    }

    /// The whole URL this node was given for `shown` (a URL as the team's
    /// database holds it), or `shown` itself.
    pub(super) fn whole(&self, shown: String) -> Result<String, RegistryError> {
        if shared(&shown) != shown || !shown.contains(crate::stores::REDACTED) {
            return Ok(shown);
        }
        let kept: Option<String> = crate::lock::lock(&self.conn)
            .query_row("SELECT url FROM urls WHERE shared = ?1", [&shown], |r| {
                r.get(0)
            })
            .optional()
            .map_err(sql(&self.path, "read a URL"))?;
        Ok(kept.unwrap_or(shown))
    }
}

impl PrivateUrls {
    /// Records that this node's own fetch hashed the object of
    /// `provisional` oid and `size` to `content`.
    pub(super) fn keep_hash(
        &self,
        provisional: &Oid,
        size: u64,
        content: &Oid,
    ) -> Result<(), RegistryError> {
        crate::lock::lock(&self.conn)
            .execute(
                "INSERT INTO hashed_here (provisional, size, content) VALUES (?1, ?2, ?3)
                 ON CONFLICT (provisional, size) DO UPDATE SET content = excluded.content",
                rusqlite::params![provisional.to_hex(), size as i64, content.to_hex()],
            )
            .map_err(sql(&self.path, "keep a hash"))?;
        Ok(())
    }

    /// The content oid this node's own fetch hashed the object of
    /// `provisional` oid and `size` to, if it fetched it.
    pub(super) fn own_hash(
        &self,
        provisional: &Oid,
        size: u64,
    ) -> Result<Option<Oid>, RegistryError> {
        let hex: Option<String> = crate::lock::lock(&self.conn)
            .query_row(
                "SELECT content FROM hashed_here WHERE provisional = ?1 AND size = ?2",
                rusqlite::params![provisional.to_hex(), size as i64],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql(&self.path, "read a hash"))?;
        // Written by this node alone (0600): a row that does not parse is
        // a damaged file, taken as no record (the object is fetched again).
        Ok(hex.and_then(|h| h.parse::<Oid>().ok()))
    }
}

fn sql<'a>(path: &'a Path, op: &'static str) -> impl Fn(rusqlite::Error) -> RegistryError + 'a {
    move |source| RegistryError::Sqlite {
        op,
        path: path.to_path_buf(),
        source,
    }
}
