//! The team database's schema: every table the PostgreSQL engines use (the
//! pool's kv and large tiers, pins, gc's records and the nodes' roots, the
//! registry), and the migrations that make them, in order. Only this list
//! knows the order; `drsd_schema` records each migration applied (its
//! version, when, what), so a step once shipped never changes and a new one
//! goes at the end.
//!
//! Every daemon runs [`migrate`] when it joins the team (`server/team.rs`,
//! through `PgServer::migrate`), before any engine uses a table: in one
//! transaction, under a transaction-scoped advisory lock, so two nodes
//! starting at once take turns and the second finds the work done. Each
//! engine still makes its own tables when it finds them missing
//! ([`create_tables`], the same text, `IF NOT EXISTS`): one opened on its
//! own (a test, a tool) works as before. The
//! first migration is written `IF NOT EXISTS` throughout: a database made
//! by a drsd from before this list (tables, no `drsd_schema`) takes it as
//! a no-op and is at version 1 after.

use postgres::Transaction;

use super::PgConn;

/// The advisory lock every schema change takes (the same key the tables'
/// creation took before migrations were versioned, so an older node
/// creating its tables and a newer one migrating also take turns).
pub(crate) const SCHEMA_LOCK: i64 = 7_120_943;

/// The kv tier (`pool::PgKvEngine`). Values are toasted only past 8160
/// bytes, not past the default 2 KiB, so a value of a few KiB (most kv
/// entries) stays in its row, written once, instead of being compressed
/// (in vain: pool content is mostly compressed already) and cut into TOAST
/// chunks, each with its own index entry. The `ALTER` brings a table made
/// before to the same setting (a catalog change, no rewrite; rows already
/// toasted stay so).
pub(crate) const KV: &str = "\
    CREATE TABLE IF NOT EXISTS drsd_kv (key bytea PRIMARY KEY, value bytea NOT NULL) \
      WITH (toast_tuple_target = 8160);\
    ALTER TABLE drsd_kv SET (toast_tuple_target = 8160);\
    CREATE TABLE IF NOT EXISTS drsd_kv_quarantine \
      (key bytea NOT NULL, value bytea NOT NULL, at timestamptz NOT NULL DEFAULT now());";

/// The large tier in large objects (`pool::PgLoEngine`).
pub(crate) const LARGE: &str = "\
    CREATE TABLE IF NOT EXISTS drsd_large \
      (key bytea PRIMARY KEY, lo oid NOT NULL UNIQUE, len bigint NOT NULL);\
    CREATE TABLE IF NOT EXISTS drsd_large_stage \
      (lo oid PRIMARY KEY, touched timestamptz NOT NULL DEFAULT now());\
    CREATE TABLE IF NOT EXISTS drsd_large_quarantine \
      (key bytea NOT NULL, lo oid NOT NULL, len bigint NOT NULL, \
       at timestamptz NOT NULL DEFAULT now());";

/// The lab's pins (`pool::PgPins`).
pub(crate) const PINS: &str = "\
    CREATE TABLE IF NOT EXISTS drsd_pins (key bytea NOT NULL, holder text NOT NULL, \
      n integer NOT NULL, until timestamptz NOT NULL, PRIMARY KEY (key, holder));\
    CREATE INDEX IF NOT EXISTS drsd_pins_holder ON drsd_pins (holder);";

/// When gc last saw each entry referenced (`pool::PgGcRecords`).
pub(crate) const GC_SEEN: &str = "CREATE TABLE IF NOT EXISTS drsd_gc_seen \
    (key bytea PRIMARY KEY, at bigint NOT NULL);";

/// The roots each node published (`ops::gc::pg_roots`).
pub(crate) const ROOTS: &str = "\
    CREATE TABLE IF NOT EXISTS team_roots (node text NOT NULL, repo text NOT NULL, \
      oid bytea NOT NULL, PRIMARY KEY (node, repo, oid));\
    CREATE TABLE IF NOT EXISTS team_root_sets (node text NOT NULL, repo text NOT NULL, \
      roots bigint NOT NULL, published timestamptz NOT NULL, PRIMARY KEY (node, repo));";

/// The registry (`registry::postgres`). Times the daemon gives (next
/// tries, records) are seconds since the epoch by the node's clock, as in
/// SQLite; leases and `last_seen` are the server's `timestamptz`.
pub(crate) const REGISTRY: &str = "
    CREATE TABLE IF NOT EXISTS drsd_reg_objects (
        id bigserial PRIMARY KEY,
        url text NOT NULL,
        bucket text,
        key text,
        version_id text,
        etag text NOT NULL,
        size bigint NOT NULL,
        provisional_oid text NOT NULL,
        content_oid text,
        drs_id text,
        last_modified text,
        recorded_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        md5 text,
        content_read boolean NOT NULL DEFAULT false,
        UNIQUE (url, etag, size)
    );
    CREATE INDEX IF NOT EXISTS drsd_reg_objects_provisional ON drsd_reg_objects (provisional_oid);
    CREATE INDEX IF NOT EXISTS drsd_reg_objects_content ON drsd_reg_objects (content_oid);
    CREATE TABLE IF NOT EXISTS drsd_reg_repo_refs (
        node text NOT NULL,
        repo text NOT NULL,
        path text NOT NULL,
        oid text NOT NULL,
        object_id bigint NOT NULL REFERENCES drsd_reg_objects (id),
        added_at bigint NOT NULL,
        PRIMARY KEY (node, repo, path)
    );
    CREATE INDEX IF NOT EXISTS drsd_reg_repo_refs_object ON drsd_reg_repo_refs (object_id);
    CREATE TABLE IF NOT EXISTS drsd_reg_jobs (
        object_id bigint PRIMARY KEY REFERENCES drsd_reg_objects (id),
        state text NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        next_at bigint NOT NULL DEFAULT 0,
        error text,
        updated_at bigint NOT NULL,
        claimed_by text,
        lease_until timestamptz
    );
    CREATE INDEX IF NOT EXISTS drsd_reg_jobs_due ON drsd_reg_jobs (state, next_at);
    CREATE TABLE IF NOT EXISTS drsd_reg_uploads (
        node text NOT NULL,
        endpoint text NOT NULL,
        bucket text NOT NULL,
        key text NOT NULL,
        upload_id text NOT NULL,
        started bigint NOT NULL,
        PRIMARY KEY (node, endpoint, bucket, upload_id)
    );
    CREATE TABLE IF NOT EXISTS drsd_reg_sent (
        endpoint text NOT NULL,
        bucket text NOT NULL,
        key text NOT NULL,
        oid text NOT NULL,
        size bigint NOT NULL,
        etag text NOT NULL,
        at bigint NOT NULL,
        PRIMARY KEY (endpoint, bucket, key)
    );
    CREATE TABLE IF NOT EXISTS drsd_reg_indexd (
        indexd text NOT NULL,
        oid text NOT NULL,
        did text,
        updated_at bigint NOT NULL,
        PRIMARY KEY (indexd, oid)
    );
    CREATE TABLE IF NOT EXISTS drsd_reg_url_holders (
        object_id bigint NOT NULL REFERENCES drsd_reg_objects (id),
        node text NOT NULL,
        PRIMARY KEY (object_id, node)
    );
    CREATE TABLE IF NOT EXISTS drsd_team_nodes (
        name text PRIMARY KEY,
        host text NOT NULL,
        username text NOT NULL,
        started timestamptz NOT NULL DEFAULT now(),
        last_seen timestamptz NOT NULL DEFAULT now()
    );
";

/// One migration: what it does (recorded with it) and its statements.
struct Migration {
    what: &'static str,
    steps: &'static [&'static str],
}

/// The migrations, in order; the first is version 1.
const MIGRATIONS: &[Migration] = &[
    Migration {
        what: "the team's tables: pool, pins, gc records, roots, registry",
        steps: &[KV, LARGE, PINS, GC_SEEN, ROOTS, REGISTRY],
    },
    Migration {
        what: "uploads through Fence are each node's own (its state folder)",
        steps: &[DROP_FENCE_JOURNALS],
    },
];

/// The journals of uploads through Fence an older drsd kept in the team's
/// database, where every member could forge a step or a part: each node
/// keeps its own now (`registry/gen3/mod.rs`), and reads none of these.
const DROP_FENCE_JOURNALS: &str = "
    DROP TABLE IF EXISTS drsd_reg_fence_upload_parts;
    DROP TABLE IF EXISTS drsd_reg_fence_uploads;
";

/// The version this drsd brings a database to.
pub(crate) fn latest() -> i32 {
    MIGRATIONS.len() as i32
}

/// Applies, once each and in order, the migrations the database lacks;
/// returns the version it is at after. A database a newer drsd migrated
/// further is left as it is.
pub(crate) fn migrate(conn: &mut PgConn) -> Result<i32, postgres::Error> {
    let mut tx = conn.client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS drsd_schema (version integer PRIMARY KEY, \
           what text NOT NULL, applied timestamptz NOT NULL DEFAULT now())",
    )?;
    let at = version(&mut tx)?;
    if at > latest() {
        log::warn!(
            "the team's database is at schema version {at}, past this drsd's {}: a newer \
             drsd migrated it; upgrade this node",
            latest()
        );
    }
    for (n, migration) in MIGRATIONS.iter().enumerate() {
        let v = n as i32 + 1;
        if v <= at {
            continue;
        }
        for step in migration.steps {
            tx.batch_execute(step)?;
        }
        tx.execute(
            "INSERT INTO drsd_schema (version, what) VALUES ($1, $2)",
            &[&v, &migration.what],
        )?;
    }
    let now = version(&mut tx)?;
    tx.commit()?;
    Ok(now)
}

fn version(tx: &mut Transaction<'_>) -> Result<i32, postgres::Error> {
    tx.query_one("SELECT COALESCE(max(version), 0) FROM drsd_schema", &[])?
        .try_get(0)
}

/// Makes `ddl` (one of this module's tables) when missing, under the
/// schema's lock: for an engine that finds its tables missing (opened on
/// its own, or a table dropped under a running daemon).
pub(crate) fn create_tables(conn: &mut PgConn, ddl: &str) -> Result<(), postgres::Error> {
    let mut tx = conn.client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
    tx.batch_execute(ddl)?;
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::{PgServer, TestDb};

    #[test]
    fn nodes_starting_at_once_migrate_a_database_once_to_the_latest_version() {
        let db = TestDb::create();
        let starts: Vec<_> = (0..6)
            .map(|_| {
                let url = db.url.clone();
                std::thread::spawn(move || PgServer::open(&url)?.migrate())
            })
            .collect();
        for start in starts {
            start.join().unwrap().unwrap();
        }
        let mut c = db.client();
        let rows = c
            .query("SELECT version FROM drsd_schema ORDER BY version", &[])
            .unwrap();
        let applied: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
        assert_eq!(applied, (1..=latest()).collect::<Vec<_>>());
        for table in ["drsd_kv", "drsd_pins", "team_roots", "drsd_reg_objects"] {
            let found: bool = c
                .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
                .unwrap()
                .get(0);
            assert!(found, "{table} was not made");
        }
    }

    #[test]
    fn a_database_an_older_drsd_made_is_taken_at_version_1_with_its_rows() {
        let db = TestDb::create();
        let mut c = db.client();
        // What an older drsd left: the tables, no schema record.
        c.batch_execute(KV).unwrap();
        c.batch_execute("INSERT INTO drsd_kv (key, value) VALUES ('\\x01', '\\x02')")
            .unwrap();
        PgServer::open(&db.url).unwrap().migrate().unwrap();
        let v: i32 = c
            .query_one("SELECT max(version) FROM drsd_schema", &[])
            .unwrap()
            .get(0);
        assert_eq!(v, latest());
        let n: i64 = c
            .query_one("SELECT count(*) FROM drsd_kv", &[])
            .unwrap()
            .get(0);
        assert_eq!(n, 1, "the rows stay");
    }

    #[test]
    fn the_fence_journals_an_older_drsd_kept_in_the_team_database_are_dropped() {
        let db = TestDb::create();
        let mut c = db.client();
        c.batch_execute(
            "CREATE TABLE drsd_reg_fence_uploads (commons text, oid text, step text);
             INSERT INTO drsd_reg_fence_uploads VALUES ('gen3+https://c', 'ab', 'done');
             CREATE TABLE drsd_reg_fence_upload_parts (commons text, etag text);",
        )
        .unwrap();
        PgServer::open(&db.url).unwrap().migrate().unwrap();
        for table in ["drsd_reg_fence_uploads", "drsd_reg_fence_upload_parts"] {
            let found: bool = c
                .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
                .unwrap()
                .get(0);
            assert!(!found, "{table} is still there");
        }
    }
}
