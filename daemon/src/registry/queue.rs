//! The prefetch queue: one job per foreign object whose content oid is not
//! known yet, in the registry's database, so it survives restarts and a
//! kill -9 (a job found `running` at start was interrupted: it is queued
//! again, and its download resumes from its partial file).
//!
//! States: `queued` (due at `next_at`), `running`, `retrying` (failed,
//! tried again at `next_at`, after a backoff), `failed` (for good: the error
//! cannot pass by itself, or the content did not match after a bounded
//! number of tries; [`JobQueue::retry_failed`] queues it again, as
//! `drsctl promote --retry` asks), `done`, `held` (over the size limit: not
//! fetched, until a daemon with a larger limit starts), `skipped`
//! (`add-url --no-fetch`).
//!
//! A `done` job's `error` is a note on how its bytes were checked, shown by
//! `drsctl status`: set when the object's ETag could not be verified
//! (a multipart ETag whose parts count no part size fits).
//!
//! Here: the job's types, every engine's, and SQLite's [`JobQueue`]
//! ([`SqliteRegistry`]); its table's schema is `SCHEMA`.

use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::engine::JobQueue;
use super::sqlite::{object_at, sql, SqliteRegistry, OBJECT_COLUMNS};
use super::{now, ForeignObject, JobState, RegistryError};
use crate::pool::Oid;

pub(super) const SCHEMA: &str = "
    CREATE TABLE jobs (
        object_id INTEGER PRIMARY KEY REFERENCES objects (id),
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX jobs_due ON jobs (state, next_at);
";

/// A claimed job: the object to fetch and hash.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: i64,
    pub object: ForeignObject,
    /// Earlier tries, failed.
    pub attempts: u32,
}

/// A job not done, for `drsctl status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenJob {
    /// The URL, redacted (see `remote::redacted`).
    pub url: String,
    pub size: u64,
    pub state: JobState,
    pub attempts: u32,
    pub error: Option<String>,
    /// When a `retrying` job is tried again (seconds since the epoch).
    pub retry_at: Option<u64>,
}

/// A job as `drsctl status` shows it: the wire's form of [`OpenJob`].
pub use drsd_proto::JobLine;

/// The one conversion of a job's domain form to the wire's.
impl From<OpenJob> for JobLine {
    fn from(job: OpenJob) -> JobLine {
        JobLine {
            url: job.url,
            size: job.size,
            state: job.state.into(),
            attempts: job.attempts,
            error: job.error,
            retry_at: job.retry_at,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCounts {
    pub queued: u64,
    pub running: u64,
    pub retrying: u64,
    pub failed: u64,
    pub held: u64,
    pub done: u64,
}

impl JobQueue for SqliteRegistry {
    /// Queues a job for every object without a content oid and without a
    /// job; objects larger than `max_size` are held. Returns how many were
    /// queued. Idempotent: add-url calls it after recording, the daemon at start.
    fn queue_unhashed(&self, max_size: Option<u64>) -> Result<usize, RegistryError> {
        self.write("queue jobs", |tx| {
            let limit = max_size.map_or(i64::MAX, |m| i64::try_from(m).unwrap_or(i64::MAX));
            tx.execute(
                "INSERT INTO jobs (object_id, state, updated_at)
                 SELECT id, CASE WHEN size > ?1 THEN ?3 ELSE ?4 END, ?2 FROM objects
                 WHERE (content_oid IS NULL OR content_read = 0)
                    AND id NOT IN (SELECT object_id FROM jobs)",
                params![limit, now() as i64, JobState::Held, JobState::Queued],
            )
        })
    }

    /// Records that the objects with these provisional oids are not to be
    /// prefetched (`add-url --no-fetch`): their jobs are `skipped`.
    fn skip(&self, provisional_oids: &[Oid]) -> Result<(), RegistryError> {
        self.write("skip jobs", |tx| {
            for oid in provisional_oids {
                tx.execute(
                    "INSERT INTO jobs (object_id, state, updated_at)
                     SELECT id, ?3, ?2 FROM objects WHERE (provisional_oid = ?1 OR content_oid = ?1)
                        AND (content_oid IS NULL OR content_read = 0)
                     ON CONFLICT (object_id) DO UPDATE SET state = ?3, updated_at = ?2
                     WHERE state != ?4",
                    params![
                        oid.to_hex(),
                        now() as i64,
                        JobState::Skipped,
                        JobState::Done
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// Records tries made outside the queue that failed (add-url's read of
    /// a small object), by provisional oid: each object's job counts one
    /// attempt more and is `retrying` at its time, or `failed` for good
    /// with none, with its reason; so the workers neither repeat a try at
    /// once nor give the object more tries than any other job. A job that
    /// is running or done is left alone.
    fn tried(&self, failures: &[(Oid, String, Option<u64>)]) -> Result<(), RegistryError> {
        self.write("record tries", |tx| {
            for (oid, why, retry_at) in failures {
                let state = match retry_at {
                    Some(_) => JobState::Retrying,
                    None => JobState::Failed,
                };
                tx.execute(
                    "INSERT INTO jobs (object_id, state, attempts, next_at, error, updated_at)
                     SELECT id, ?2, 1, ?3, ?4, ?5 FROM objects
                     WHERE (provisional_oid = ?1 OR content_oid = ?1)
                        AND (content_oid IS NULL OR content_read = 0)
                     ON CONFLICT (object_id) DO UPDATE SET state = ?2, attempts = attempts + 1,
                        next_at = ?3, error = ?4, updated_at = ?5
                     WHERE state NOT IN (?6, ?7)",
                    params![
                        oid.to_hex(),
                        state,
                        retry_at.unwrap_or(0) as i64,
                        why,
                        now() as i64,
                        JobState::Running,
                        JobState::Done
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// The state of the prefetch job of the object at `url` with this ETag
    /// and size, and the reason of its last failure, if it has a job.
    fn job_state(
        &self,
        url: &str,
        etag: &str,
        size: u64,
    ) -> Result<Option<(JobState, Option<String>)>, RegistryError> {
        self.lock()
            .query_row(
                "SELECT j.state, j.error FROM jobs j JOIN objects o ON o.id = j.object_id
                 WHERE o.url = ?1 AND o.etag = ?2 AND o.size = ?3",
                params![url, etag, size],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(sql(self.path(), "look up a job"))
    }

    /// Queues held jobs that `max_size` no longer holds (the limit changed).
    fn release_held(&self, max_size: Option<u64>) -> Result<usize, RegistryError> {
        let limit = max_size.map_or(i64::MAX, |m| i64::try_from(m).unwrap_or(i64::MAX));
        self.write("release held jobs", |tx| {
            tx.execute(
                "UPDATE jobs SET state = ?3, updated_at = ?2 WHERE state = ?4
                 AND object_id IN (SELECT id FROM objects WHERE size <= ?1)",
                params![limit, now() as i64, JobState::Queued, JobState::Held],
            )
        })
    }

    /// Queues again, as new, the jobs in one of the states `from` of the
    /// unhashed objects with these provisional oids (`drsctl fetch` after
    /// `add-url --no-fetch`, or a failure fixed); returns how many.
    fn queue_again(
        &self,
        provisional_oids: &[Oid],
        from: &[JobState],
    ) -> Result<usize, RegistryError> {
        self.write("queue jobs again", |tx| {
            let mut n = 0;
            for oid in provisional_oids {
                for state in from {
                    n += tx.execute(
                        "UPDATE jobs SET state = ?3, attempts = 0, error = NULL, next_at = 0,
                            updated_at = ?2
                         WHERE state = ?4 AND object_id IN (
                            SELECT id FROM objects
                            WHERE (provisional_oid = ?1 OR content_oid = ?1)
                               AND (content_oid IS NULL OR content_read = 0))",
                        params![oid.to_hex(), now() as i64, JobState::Queued, state],
                    )?;
                }
            }
            Ok(n)
        })
    }

    /// Queues again, as new, the `failed` jobs whose reason starts with
    /// `reason` (a full pool's `no_space`, which room made since may
    /// mend): at the daemon's start. Returns how many.
    fn requeue_failed_for(&self, reason: &str) -> Result<usize, RegistryError> {
        self.write("requeue jobs", |tx| {
            tx.execute(
                "UPDATE jobs SET state = ?2, attempts = 0, error = NULL, next_at = 0,
                    updated_at = ?1
                 WHERE state = ?3 AND substr(error, 1, length(?4)) = ?4",
                params![now() as i64, JobState::Queued, JobState::Failed, reason],
            )
        })
    }

    /// Puts jobs left `running` by a daemon that stopped back in the queue.
    fn requeue_running(&self) -> Result<usize, RegistryError> {
        self.write("requeue jobs", |tx| {
            tx.execute(
                "UPDATE jobs SET state = ?2, updated_at = ?1 WHERE state = ?3",
                params![now() as i64, JobState::Queued, JobState::Running],
            )
        })
    }

    /// Takes the job due first among objects of at most `max_size` bytes,
    /// if any is due by `at`, and marks it running: the small-object lane.
    fn claim_up_to(&self, at: u64, max_size: u64) -> Result<Option<Job>, RegistryError> {
        let query = "UPDATE jobs SET state = ?2, updated_at = ?1 WHERE object_id = (
                SELECT j.object_id FROM jobs j JOIN objects o ON o.id = j.object_id
                WHERE j.state IN (?3, ?4) AND j.next_at <= ?1 AND o.size <= ?5
                ORDER BY j.next_at, j.object_id LIMIT 1)
             RETURNING object_id, attempts";
        let states = (JobState::Running, JobState::Queued, JobState::Retrying);
        let max = i64::try_from(max_size).unwrap_or(i64::MAX);
        self.write("claim a job", |tx| {
            let claimed: Option<(i64, u32)> = tx
                .query_row(
                    query,
                    params![at as i64, states.0, states.1, states.2, max],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let Some((id, attempts)) = claimed else {
                return Ok(None);
            };
            let object = tx.query_row(
                &format!("SELECT {OBJECT_COLUMNS} FROM objects o WHERE o.id = ?1"),
                [id],
                |row| object_at(row, 0),
            )?;
            Ok(Some(Job {
                id,
                object,
                attempts,
            }))
        })
    }

    /// The job's object is hashed and stored: its content oid and the job's
    /// end in one transaction (a kill between the two would fetch it again),
    /// with `note` when its ETag could not be verified. Returns the repos
    /// referring to the object.
    fn job_done(
        &self,
        job: &Job,
        content_oid: &Oid,
        md5: Option<&str>,
        note: Option<&str>,
    ) -> Result<Vec<std::path::PathBuf>, RegistryError> {
        self.write("finish a job", |tx| {
            tx.execute(
                "UPDATE objects SET content_oid = ?2, md5 = COALESCE(?3, md5), updated_at = ?4,
                    content_read = 1
                 WHERE id = ?1",
                params![job.id, content_oid.to_hex(), md5, now() as i64],
            )?;
            tx.execute(
                "UPDATE jobs SET state = ?3, error = ?4, updated_at = ?2 WHERE object_id = ?1",
                params![job.id, now() as i64, JobState::Done, note],
            )?;
            let mut stmt =
                tx.prepare("SELECT DISTINCT repo FROM repo_refs WHERE object_id = ?1")?;
            let repos = stmt.query_map([job.id], |r| r.get::<_, String>(0))?;
            repos.map(|r| r.map(std::path::PathBuf::from)).collect()
        })
    }

    /// The job failed with `why`: it is `retrying` at `retry_at`, or, with
    /// none, `failed` for good (until [`JobQueue::retry_failed`]).
    fn job_failed(&self, job: &Job, why: &str, retry_at: Option<u64>) -> Result<(), RegistryError> {
        let state = match retry_at {
            Some(_) => JobState::Retrying,
            None => JobState::Failed,
        };
        self.write("fail a job", |tx| {
            tx.execute(
                "UPDATE jobs SET state = ?5, attempts = attempts + 1, error = ?2,
                    next_at = ?3, updated_at = ?4 WHERE object_id = ?1",
                params![
                    job.id,
                    why,
                    retry_at.unwrap_or(0) as i64,
                    now() as i64,
                    state
                ],
            )
        })?;
        Ok(())
    }

    /// When the next waiting job is due, if any waits.
    fn next_due_up_to(&self, max_size: u64) -> Result<Option<u64>, RegistryError> {
        let max = i64::try_from(max_size).unwrap_or(i64::MAX);
        self.lock()
            .query_row(
                "SELECT MIN(j.next_at) FROM jobs j JOIN objects o ON o.id = j.object_id
                 WHERE j.state IN (?1, ?2) AND o.size <= ?3",
                params![JobState::Queued, JobState::Retrying, max],
                |r| r.get::<_, Option<i64>>(0),
            )
            .map(|t| t.map(|t| t.max(0) as u64))
            .map_err(sql(self.path(), "look at the queue"))
    }

    fn job_counts(&self) -> Result<JobCounts, RegistryError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached("SELECT state, COUNT(*) FROM jobs GROUP BY state")
            .map_err(sql(self.path(), "count jobs"))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u64>(1)?)))
            .map_err(sql(self.path(), "count jobs"))?;
        let mut counts = JobCounts::default();
        for row in rows {
            let (state, n) = row.map_err(sql(self.path(), "count jobs"))?;
            // A state this daemon does not know counts as done, as it always has.
            match JobState::parse(&state) {
                Some(JobState::Queued) => counts.queued = n,
                Some(JobState::Running) => counts.running = n,
                Some(JobState::Retrying) => counts.retrying = n,
                Some(JobState::Failed) => counts.failed = n,
                Some(JobState::Held | JobState::Skipped) => counts.held += n,
                Some(JobState::Done) | None => counts.done += n,
            }
        }
        Ok(counts)
    }

    /// Jobs not done, then done ones with a note, for `drsctl status` (at
    /// most `limit`).
    fn open_jobs(&self, limit: usize) -> Result<Vec<OpenJob>, RegistryError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT o.url, o.size, j.state, j.attempts, j.error, j.next_at
                 FROM jobs j JOIN objects o ON o.id = j.object_id
                 WHERE j.state != ?2 OR j.error IS NOT NULL
                 ORDER BY j.state = ?2, j.state, o.url LIMIT ?1",
            )
            .map_err(sql(self.path(), "list jobs"))?;
        let rows = stmt
            .query_map(params![limit as i64, JobState::Done], |r| {
                let state: JobState = r.get(2)?;
                let url: String = r.get(0)?;
                Ok(OpenJob {
                    url: crate::stores::redacted(&url),
                    size: r.get(1)?,
                    retry_at: (state == JobState::Retrying)
                        .then(|| r.get::<_, i64>(5))
                        .transpose()?
                        .map(|t| t as u64),
                    state,
                    attempts: r.get(3)?,
                    error: r.get(4)?,
                })
            })
            .map_err(sql(self.path(), "list jobs"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql(self.path(), "list jobs"))
    }

    /// The objects of the jobs in any of `states`.
    fn job_objects(&self, states: &[JobState]) -> Result<Vec<ForeignObject>, RegistryError> {
        let conn = self.lock();
        let err = sql(self.path(), "list jobs");
        // The state first: the object's columns, at the end, may grow.
        let mut stmt = conn
            .prepare(&format!(
                "SELECT j.state, {OBJECT_COLUMNS} FROM jobs j JOIN objects o ON o.id = j.object_id"
            ))
            .map_err(&err)?;
        let rows = stmt
            .query_map([], |r| Ok((object_at(r, 1)?, r.get::<_, String>(0)?)))
            .map_err(&err)?;
        let mut found = Vec::new();
        for row in rows {
            let (object, state) = row.map_err(&err)?;
            if JobState::parse(&state).is_some_and(|s| states.contains(&s)) {
                found.push(object);
            }
        }
        Ok(found)
    }
}
