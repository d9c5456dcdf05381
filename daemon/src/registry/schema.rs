//! The registry's SQLite schema: the migrations, in order, each table's
//! text taken from the module that reads and writes that table. Only this
//! list knows the order; `PRAGMA user_version` counts the ones applied, so
//! a step once shipped never changes and a new one goes at the end.

use super::{gen3, queue, sent, sqlite, uploads};

/// Schema migrations, applied in order; `PRAGMA user_version` counts the
/// applied ones.
pub(super) const MIGRATIONS: &[&str] = &[
    sqlite::SCHEMA,
    queue::SCHEMA,
    // The content's md5, from the prefetch's pass: what GA4GH DRS and Indexd
    // records carry beside the sha256.
    "ALTER TABLE objects ADD COLUMN md5 TEXT;",
    // `failed` was a job waiting for its next try; that is `retrying` now,
    // and `failed` is a job given up on.
    "UPDATE jobs SET state = 'retrying' WHERE state = 'failed';",
    // Multipart uploads in flight, aborted at the next start when a kill
    // left them (`uploads.rs`).
    uploads::SCHEMA,
    // Registrations with a Gen3 Indexd made at push time (`gen3/indexd.rs`).
    gen3::INDEXD_SCHEMA,
    // Whether the content oid was learnt by reading the bytes here (a
    // prefetch, add-url's read, a verified fetch), not from a claim (a
    // checksum header, `--sha256`, a DRS record): only a read lets a push
    // copy the source server-side (DESIGN.md "Trust"). Every `done` job
    // was such a read; objects named by a claim get a job at the next start.
    "ALTER TABLE objects ADD COLUMN content_read INTEGER NOT NULL DEFAULT 0;
     UPDATE objects SET content_read = 1 WHERE id IN (SELECT object_id FROM jobs WHERE state = 'done');",
    // Objects this daemon sent to an S3 object remote, with the ETag the
    // store answered: the same ETag at the key later proves the bytes.
    sent::SCHEMA,
    // Uploads to a Gen3 commons through Fence, step by step (`gen3/fence.rs`).
    gen3::FENCE_SCHEMA,
    // The parts of a multipart upload through Fence the store took, so a
    // resumed push sends only the rest (`gen3/fence.rs`).
    gen3::FENCE_PARTS_SCHEMA,
];
