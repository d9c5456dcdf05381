//! [`SqliteRegistry`]: the registry's engine on SQLite, one file in the
//! daemon's state folder (`registry.sqlite`, WAL), and its first room, the
//! foreign objects and the repos' paths ([`ForeignObjects`]). The other
//! rooms' SQL sits with their tables (`queue.rs`, `uploads.rs`, `sent.rs`,
//! `gen3/`); the order of the migrations in `schema.rs`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::engine::{ForeignObjects, RegistryEngine};
use super::oid_text::{oid_column, optional_oid_column};
use super::schema::MIGRATIONS;
use super::{Entry, ForeignObject, RegistryError};
use crate::pool::Oid;
use crate::IoError;

/// The foreign objects and the repos' paths pointing at them: the first
/// migration ([`super::schema`]).
pub(super) const SCHEMA: &str = "
    CREATE TABLE objects (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL,
        bucket TEXT,
        key TEXT,
        version_id TEXT,
        etag TEXT NOT NULL,
        size INTEGER NOT NULL,
        provisional_oid TEXT NOT NULL,
        content_oid TEXT,
        drs_id TEXT,
        last_modified TEXT,
        recorded_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        UNIQUE (url, etag, size)
    );
    CREATE INDEX objects_provisional ON objects (provisional_oid);
    CREATE INDEX objects_content ON objects (content_oid);
    CREATE TABLE repo_refs (
        repo TEXT NOT NULL,
        path TEXT NOT NULL,
        oid TEXT NOT NULL,
        object_id INTEGER NOT NULL REFERENCES objects (id),
        added_at INTEGER NOT NULL,
        PRIMARY KEY (repo, path)
    );
    CREATE INDEX repo_refs_object ON repo_refs (object_id);
";

/// The registry's engine on SQLite: one connection behind a mutex (writes
/// are short transactions; callers run them off the async threads).
pub struct SqliteRegistry {
    path: PathBuf,
    conn: Mutex<Connection>,
}

pub(super) const OBJECT_COLUMNS: &str = "o.url, o.bucket, o.key, o.version_id, o.etag, o.size, \
    o.provisional_oid, o.content_oid, o.drs_id, o.last_modified, o.recorded_at, o.md5, \
    o.content_read";

impl SqliteRegistry {
    /// Opens (or creates) the registry database at `path`, private to the
    /// user (it holds signed URLs): 0600 files in a 0700 folder.
    pub fn open(path: &Path) -> Result<SqliteRegistry, RegistryError> {
        if let Some(dir) = path.parent() {
            crate::private::dir(dir).map_err(IoError::at("create the private folder of", path))?;
        }
        crate::private::sqlite(path).map_err(IoError::at("make private", path))?;
        let registry = SqliteRegistry {
            path: path.to_path_buf(),
            conn: Mutex::new(Connection::open(path).map_err(sql(path, "open"))?),
        };
        registry.migrate()?;
        Ok(registry)
    }

    /// Opens the registry database at `path` for reading only (a team
    /// join reads this machine's own registry and must leave it as it
    /// was); `None` when there is none. A database of an older schema is
    /// refused, naming it: a daemon started once without `team_db`
    /// upgrades it.
    pub fn open_read_only(path: &Path) -> Result<Option<SqliteRegistry>, RegistryError> {
        if !path.exists() {
            return Ok(None);
        }
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(sql(path, "open read-only"))?;
        let done: usize = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sql(path, "read the schema version"))?;
        if done != MIGRATIONS.len() {
            return Err(RegistryError::OldSchema {
                path: path.to_path_buf(),
                found: done,
                wanted: MIGRATIONS.len(),
            });
        }
        Ok(Some(SqliteRegistry {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn migrate(&self) -> Result<(), RegistryError> {
        let mut conn = self.lock();
        let err = sql(&self.path, "set up");
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(&err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(&err)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(&err)?;
        let done: usize = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(&err)?;
        for (n, step) in MIGRATIONS.iter().enumerate().skip(done) {
            let tx = conn.transaction().map_err(&err)?;
            tx.execute_batch(step).map_err(&err)?;
            tx.pragma_update(None, "user_version", n + 1)
                .map_err(&err)?;
            tx.commit().map_err(&err)?;
        }
        Ok(())
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        crate::lock::lock(&self.conn)
    }

    pub(super) fn write<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, RegistryError> {
        let mut conn = self.lock();
        let err = sql(&self.path, op);
        let tx = conn.transaction().map_err(&err)?;
        let out = f(&tx).map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(out)
    }
}

impl RegistryEngine for SqliteRegistry {
    fn name(&self) -> &'static str {
        "sqlite"
    }
}

impl ForeignObjects for SqliteRegistry {
    /// Records `entries` of `repo` in one transaction: each object (a known
    /// one keeps its content oid when the entry has none) and each path.
    fn record(&self, repo: &Path, entries: &[Entry]) -> Result<(), RegistryError> {
        self.write("record", |tx| {
            for entry in entries {
                let id = upsert_object(tx, &entry.object)?;
                tx.prepare_cached(
                    "INSERT INTO repo_refs (repo, path, oid, object_id, added_at) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (repo, path) DO UPDATE SET oid = excluded.oid,
                        object_id = excluded.object_id, added_at = excluded.added_at",
                )?
                .execute(params![repo_key(repo), entry.path, entry.oid.to_hex(), id, super::now()])?;
            }
            Ok(())
        })
    }

    /// Puts back what `repo`'s mirror lists and the registry lacks; what the
    /// registry has already wins. Returns how many paths were restored.
    fn restore(&self, repo: &Path, entries: &[Entry]) -> Result<usize, RegistryError> {
        self.write("restore", |tx| {
            let mut restored = 0;
            for entry in entries {
                let id = upsert_object(tx, &entry.object)?;
                restored += tx
                    .prepare_cached(
                        "INSERT OR IGNORE INTO repo_refs (repo, path, oid, object_id, added_at)
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                    )?
                    .execute(params![
                        repo_key(repo),
                        entry.path,
                        entry.oid.to_hex(),
                        id,
                        entry.object.recorded_at
                    ])?;
            }
            Ok(restored)
        })
    }

    /// The object at `url` with this ETag and size, if recorded.
    fn lookup_by_location(
        &self,
        url: &str,
        etag: &str,
        size: u64,
    ) -> Result<Option<ForeignObject>, RegistryError> {
        let conn = self.lock();
        let query = format!(
            "SELECT {OBJECT_COLUMNS} FROM objects o WHERE url = ?1 AND etag = ?2 AND size = ?3"
        );
        conn.prepare_cached(&query)
            .and_then(|mut s| s.query_row(params![url, etag, size], object_of).optional())
            .map_err(sql(&self.path, "look up"))
    }

    /// The foreign objects known to hold content `oid`, newest first: where
    /// a download can read it when the object remote does not have it.
    fn objects_of_content(&self, oid: &Oid) -> Result<Vec<ForeignObject>, RegistryError> {
        let conn = self.lock();
        let query = format!(
            "SELECT {OBJECT_COLUMNS} FROM objects o WHERE content_oid = ?1 ORDER BY updated_at DESC"
        );
        let err = sql(&self.path, "look up by content");
        let mut stmt = conn.prepare_cached(&query).map_err(&err)?;
        let rows = stmt
            .query_map(params![oid.to_hex()], object_of)
            .map_err(&err)?;
        rows.collect::<Result<_, _>>().map_err(&err)
    }

    /// Records the content oid of the object at `url` with this ETag and
    /// size; returns the repos referring to it (their mirrors need a rewrite).
    fn set_content_oid(
        &self,
        url: &str,
        etag: &str,
        size: u64,
        content_oid: &Oid,
    ) -> Result<Vec<PathBuf>, RegistryError> {
        self.write("set the content oid", |tx| {
            tx.execute(
                "UPDATE objects SET content_oid = ?4, updated_at = ?5 WHERE url = ?1 AND etag = ?2 AND size = ?3",
                params![url, etag, size, content_oid.to_hex(), super::now()],
            )?;
            let mut stmt = tx.prepare(
                "SELECT DISTINCT r.repo FROM repo_refs r JOIN objects o ON o.id = r.object_id
                 WHERE o.url = ?1 AND o.etag = ?2 AND o.size = ?3",
            )?;
            let repos = stmt.query_map(params![url, etag, size], |r| r.get::<_, String>(0))?;
            repos.map(|r| r.map(PathBuf::from)).collect()
        })
    }

    /// Every path of `repo` that points at a foreign object, by path.
    fn for_repo(&self, repo: &Path) -> Result<Vec<Entry>, RegistryError> {
        let conn = self.lock();
        let query = format!(
            "SELECT r.path, r.oid, {OBJECT_COLUMNS} FROM repo_refs r JOIN objects o ON o.id = r.object_id
             WHERE r.repo = ?1 ORDER BY r.path"
        );
        let read = |conn: &Connection| -> rusqlite::Result<Vec<Entry>> {
            let mut stmt = conn.prepare_cached(&query)?;
            let rows = stmt.query_map([repo_key(repo)], entry_of)?;
            rows.collect()
        };
        read(&conn).map_err(sql(&self.path, "list a repo"))
    }

    /// The entries of `repo` at `paths` (those it has), in that order.
    fn entries_at(&self, repo: &Path, paths: &[&str]) -> Result<Vec<Entry>, RegistryError> {
        let conn = self.lock();
        let query = format!(
            "SELECT r.path, r.oid, {OBJECT_COLUMNS} FROM repo_refs r JOIN objects o ON o.id = r.object_id
             WHERE r.repo = ?1 AND r.path = ?2"
        );
        let read = |conn: &Connection| -> rusqlite::Result<Vec<Entry>> {
            let mut stmt = conn.prepare_cached(&query)?;
            let key = repo_key(repo);
            let mut found = Vec::with_capacity(paths.len());
            for path in paths {
                if let Some(e) = stmt.query_row(params![key, path], entry_of).optional()? {
                    found.push(e);
                }
            }
            Ok(found)
        };
        read(&conn).map_err(sql(&self.path, "look up paths"))
    }

    /// The entries of `repo` whose pointer is provisional
    /// ([`Entry::is_provisional`]), by path: chosen by SQLite, so a repo
    /// of 10,000 promoted pointers costs no 10,000 entries read.
    fn provisional_for_repo(&self, repo: &Path) -> Result<Vec<Entry>, RegistryError> {
        let conn = self.lock();
        let query = format!(
            "SELECT r.path, r.oid, {OBJECT_COLUMNS} FROM repo_refs r JOIN objects o ON o.id = r.object_id
             WHERE r.repo = ?1 AND (o.content_oid IS NULL OR o.content_oid != r.oid) ORDER BY r.path"
        );
        let read = |conn: &Connection| -> rusqlite::Result<Vec<Entry>> {
            let mut stmt = conn.prepare_cached(&query)?;
            let rows = stmt.query_map([repo_key(repo)], entry_of)?;
            rows.collect()
        };
        read(&conn).map_err(sql(&self.path, "list a repo's provisional pointers"))
    }

    /// Provisional oid -> content oid, for every object hashed so far.
    fn hashed(&self) -> Result<HashMap<Oid, Oid>, RegistryError> {
        let conn = self.lock();
        let read = |conn: &Connection| -> rusqlite::Result<HashMap<Oid, Oid>> {
            let mut stmt = conn.prepare_cached(
                "SELECT provisional_oid, content_oid FROM objects WHERE content_oid IS NOT NULL",
            )?;
            let rows = stmt.query_map([], |r| Ok((oid_column(r, 0)?, oid_column(r, 1)?)))?;
            rows.collect()
        };
        read(&conn).map_err(sql(&self.path, "list hashed objects"))
    }

    /// How many objects are recorded, and how many of them have a content oid.
    fn counts(&self) -> Result<(u64, u64), RegistryError> {
        self.lock()
            .query_row(
                "SELECT COUNT(*), COUNT(content_oid) FROM objects",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(sql(&self.path, "count"))
    }
}

/// Inserts the object or updates what is known of it; returns its row id.
/// `recorded_at` keeps the earliest time: a mirror restored after the same
/// object was added again still dates it from its first record.
fn upsert_object(tx: &Transaction<'_>, o: &ForeignObject) -> rusqlite::Result<i64> {
    tx.prepare_cached(
        "INSERT INTO objects (url, bucket, key, version_id, etag, size, provisional_oid,
            content_oid, drs_id, last_modified, recorded_at, updated_at, md5, content_read)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12, ?13)
         ON CONFLICT (url, etag, size) DO UPDATE SET
            content_read = CASE WHEN excluded.content_read = 1 AND (objects.content_oid IS NULL
                OR objects.content_oid = excluded.content_oid) THEN 1 ELSE objects.content_read END,
            content_oid = COALESCE(objects.content_oid, excluded.content_oid),
            md5 = COALESCE(objects.md5, excluded.md5),
            drs_id = COALESCE(objects.drs_id, excluded.drs_id),
            version_id = COALESCE(objects.version_id, excluded.version_id),
            recorded_at = MIN(objects.recorded_at, excluded.recorded_at)
         RETURNING id",
    )?
    .query_row(
        params![
            o.url,
            o.bucket,
            o.key,
            o.version_id,
            o.etag,
            o.size,
            o.provisional_oid.to_hex(),
            o.content_oid.map(|c| c.to_hex()),
            o.drs_id,
            o.last_modified,
            o.recorded_at,
            o.md5,
            o.content_read
        ],
        |r| r.get(0),
    )
}

/// An entry from a row of `r.path, r.oid, OBJECT_COLUMNS`.
fn entry_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<Entry> {
    Ok(Entry {
        path: row.get(0)?,
        oid: oid_column(row, 1)?,
        object: object_at(row, 2)?,
    })
}

fn object_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<ForeignObject> {
    object_at(row, 0)
}

pub(super) fn object_at(row: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<ForeignObject> {
    Ok(ForeignObject {
        url: row.get(at)?,
        bucket: row.get(at + 1)?,
        key: row.get(at + 2)?,
        version_id: row.get(at + 3)?,
        etag: row.get(at + 4)?,
        size: row.get(at + 5)?,
        provisional_oid: oid_column(row, at + 6)?,
        content_oid: optional_oid_column(row, at + 7)?,
        drs_id: row.get(at + 8)?,
        last_modified: row.get(at + 9)?,
        recorded_at: row.get(at + 10)?,
        md5: row.get(at + 11)?,
        content_read: row.get(at + 12)?,
    })
}

/// Repos are keyed by their top folder as the daemon registers it.
fn repo_key(repo: &Path) -> String {
    repo.to_string_lossy().into_owned()
}

pub(super) fn sql<'a>(
    path: &'a Path,
    op: &'static str,
) -> impl Fn(rusqlite::Error) -> RegistryError + 'a {
    move |source| RegistryError::Sqlite {
        op,
        path: path.to_path_buf(),
        source,
    }
}
