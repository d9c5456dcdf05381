//! [`PgRegistry`]'s prefetch queue, shared by every node. The states are
//! the queue's (`registry/queue.rs`); what is added here is the claim's
//! owner and lease (see the module's design note in `mod.rs`).

use super::rows::{big, object_at, StateText, OBJECT_COLUMNS};
use super::PgRegistry;
use crate::pool::Oid;
use crate::registry::engine::JobQueue;
use crate::registry::{now, ForeignObject, Job, JobCounts, JobState, OpenJob, RegistryError};

/// Whether a running job's lease (of alias `j`) lapsed, `$N` being this
/// node's lease in milliseconds. No node renews a lease further than now +
/// its lease, so one further ahead (`'infinity'`, a year) was written by
/// hand, by a member of the lab: taken as it is, it would hold the job for
/// a node that may not exist, and `promote --wait` with it, for ever. It is
/// read back capped at now + the lease, and counts as lapsed: the job is
/// taken over. (Nodes are meant to share `team_lease_secs`; one with a
/// longer lease than this node's may lose a job to a second download,
/// never a byte.) The cap is taken from `clock_timestamp()`, the time of
/// the read: `now()` is when this transaction began, which may be before
/// another node's claim that this one then reads, whose lease counts from
/// that node's later `now()`.
fn lease_lapsed(param: usize) -> String {
    format!(
        "(j.lease_until IS NULL OR j.lease_until < now()
          OR j.lease_until > clock_timestamp() + ${param} * interval '1 millisecond')"
    )
}

/// A job's lease end as this node reads it back: capped at now + its lease.
fn lease_read_back(param: usize) -> String {
    format!("LEAST(j.lease_until, clock_timestamp() + ${param} * interval '1 millisecond')")
}

/// A job is takeable when it is due, or running on a lease that lapsed
/// (its node stopped renewing: dead, or cut off from the database; or a
/// lease no node writes, [`lease_lapsed`]), and this node can fetch its
/// object: its URL holds no secret, or this node holds it whole
/// (`secrets.rs`).
/// `FOR UPDATE SKIP LOCKED`: a second claimer passes over the row the first
/// one is taking instead of waiting for it, and never gets it.
fn claim_sql() -> String {
    format!(
        "WITH next AS (
            SELECT j.object_id FROM drsd_reg_jobs j JOIN drsd_reg_objects o ON o.id = j.object_id
            WHERE ((j.state IN ('queued', 'retrying') AND j.next_at <= $1)
                   OR (j.state = 'running' AND {lapsed}))
              AND o.size <= $2
              AND (NOT EXISTS (SELECT 1 FROM drsd_reg_url_holders h WHERE h.object_id = o.id)
                   OR EXISTS (SELECT 1 FROM drsd_reg_url_holders h
                              WHERE h.object_id = o.id AND h.node = $3))
            ORDER BY j.next_at, j.object_id
            LIMIT 1
            FOR UPDATE OF j SKIP LOCKED)
        UPDATE drsd_reg_jobs j SET state = 'running', claimed_by = $3,
            lease_until = now() + $4 * interval '1 millisecond', updated_at = $5
        FROM next WHERE j.object_id = next.object_id
        RETURNING j.object_id, j.attempts",
        lapsed = lease_lapsed(4)
    )
}

/// Puts a job back as new for its next claim: no owner, no lease.
const UNCLAIMED: &str = "claimed_by = NULL, lease_until = NULL";

impl JobQueue for PgRegistry {
    fn queue_unhashed(&self, max_size: Option<u64>) -> Result<usize, RegistryError> {
        let limit = max_size.map_or(i64::MAX, big);
        self.tx("queue jobs", |tx| {
            // ON CONFLICT: two nodes queueing the same object at once.
            let n = tx.execute(
                "INSERT INTO drsd_reg_jobs (object_id, state, updated_at)
                 SELECT id, CASE WHEN size > $1 THEN 'held' ELSE 'queued' END, $2
                 FROM drsd_reg_objects o
                 WHERE (content_oid IS NULL OR NOT content_read)
                    AND NOT EXISTS (SELECT 1 FROM drsd_reg_jobs j WHERE j.object_id = o.id)
                 ON CONFLICT (object_id) DO NOTHING",
                &[&limit, &big(now())],
            )?;
            Ok(n as usize)
        })
    }

    fn skip(&self, provisional_oids: &[Oid]) -> Result<(), RegistryError> {
        let oids: Vec<String> = provisional_oids.iter().map(Oid::to_hex).collect();
        self.tx("skip jobs", |tx| {
            tx.execute(
                &format!(
                    "INSERT INTO drsd_reg_jobs AS j (object_id, state, updated_at)
                     SELECT id, 'skipped', $2 FROM drsd_reg_objects
                     WHERE (provisional_oid = ANY($1) OR content_oid = ANY($1))
                        AND (content_oid IS NULL OR NOT content_read)
                     ON CONFLICT (object_id) DO UPDATE SET state = 'skipped', updated_at = $2,
                        {UNCLAIMED}
                     WHERE j.state != 'done'"
                ),
                &[&oids, &big(now())],
            )?;
            Ok(())
        })
    }

    fn tried(&self, failures: &[(Oid, String, Option<u64>)]) -> Result<(), RegistryError> {
        self.tx("record tries", |tx| {
            let stmt = tx.prepare(
                "INSERT INTO drsd_reg_jobs AS j
                    (object_id, state, attempts, next_at, error, updated_at)
                 SELECT id, $2, 1, $3, $4, $5 FROM drsd_reg_objects
                 WHERE (provisional_oid = $1 OR content_oid = $1)
                    AND (content_oid IS NULL OR NOT content_read)
                 ON CONFLICT (object_id) DO UPDATE SET state = $2, attempts = j.attempts + 1,
                    next_at = $3, error = $4, updated_at = $5
                 WHERE j.state NOT IN ('running', 'done')",
            )?;
            for (oid, why, retry_at) in failures {
                let state = match retry_at {
                    Some(_) => JobState::Retrying,
                    None => JobState::Failed,
                };
                tx.execute(
                    &stmt,
                    &[
                        &oid.to_hex(),
                        &state.as_str(),
                        &big(retry_at.unwrap_or(0)),
                        why,
                        &big(now()),
                    ],
                )?;
            }
            Ok(())
        })
    }

    fn job_state(
        &self,
        url: &str,
        etag: &str,
        size: u64,
    ) -> Result<Option<(JobState, Option<String>)>, RegistryError> {
        let url = super::secrets::shared(url);
        let url = url.as_str();
        self.tx("look up a job", |tx| {
            let row = tx.query_opt(
                "SELECT j.state, j.error FROM drsd_reg_jobs j
                 JOIN drsd_reg_objects o ON o.id = j.object_id
                 WHERE o.url = $1 AND o.etag = $2 AND o.size = $3",
                &[&url, &etag, &big(size)],
            )?;
            row.map(|r| Ok((r.try_get::<_, StateText>(0)?.0, r.try_get(1)?)))
                .transpose()
        })
    }

    fn release_held(&self, max_size: Option<u64>) -> Result<usize, RegistryError> {
        let limit = max_size.map_or(i64::MAX, big);
        self.tx("release held jobs", |tx| {
            let n = tx.execute(
                "UPDATE drsd_reg_jobs SET state = 'queued', updated_at = $2 WHERE state = 'held'
                 AND object_id IN (SELECT id FROM drsd_reg_objects WHERE size <= $1)",
                &[&limit, &big(now())],
            )?;
            Ok(n as usize)
        })
    }

    fn queue_again(
        &self,
        provisional_oids: &[Oid],
        from: &[JobState],
    ) -> Result<usize, RegistryError> {
        let oids: Vec<String> = provisional_oids.iter().map(Oid::to_hex).collect();
        let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
        self.tx("queue jobs again", |tx| {
            let n = tx.execute(
                &format!(
                    "UPDATE drsd_reg_jobs SET state = 'queued', attempts = 0, error = NULL,
                        next_at = 0, updated_at = $3, {UNCLAIMED}
                     WHERE state = ANY($2) AND object_id IN (
                        SELECT id FROM drsd_reg_objects
                        WHERE (provisional_oid = ANY($1) OR content_oid = ANY($1))
                           AND (content_oid IS NULL OR NOT content_read))"
                ),
                &[&oids, &from, &big(now())],
            )?;
            Ok(n as usize)
        })
    }

    fn requeue_failed_for(&self, reason: &str) -> Result<usize, RegistryError> {
        self.tx("requeue jobs", |tx| {
            let n = tx.execute(
                "UPDATE drsd_reg_jobs SET state = 'queued', attempts = 0, error = NULL,
                    next_at = 0, updated_at = $1
                 WHERE state = 'failed' AND left(error, length($2)) = $2",
                &[&big(now()), &reason],
            )?;
            Ok(n as usize)
        })
    }

    /// This node's claims (its last run was interrupted) and lapsed ones
    /// (their node is gone); never a live node's.
    fn requeue_running(&self) -> Result<usize, RegistryError> {
        self.tx("requeue jobs", |tx| {
            let n = tx.execute(
                &format!(
                    "UPDATE drsd_reg_jobs j SET state = 'queued', updated_at = $2, {UNCLAIMED}
                     WHERE state = 'running' AND (claimed_by = $1 OR claimed_by IS NULL
                        OR {lapsed})",
                    lapsed = lease_lapsed(3)
                ),
                &[&self.node.name, &big(now()), &(self.lease_ms as f64)],
            )?;
            Ok(n as usize)
        })
    }

    fn claim_up_to(&self, at: u64, max_size: u64) -> Result<Option<Job>, RegistryError> {
        let claimed = self.tx("claim a job", |tx| {
            let Some(row) = tx.query_opt(
                &claim_sql(),
                &[
                    &big(at),
                    &big(max_size),
                    &self.node.name,
                    &(self.lease_ms as f64),
                    &big(now()),
                ],
            )?
            else {
                return Ok(None);
            };
            let id: i64 = row.try_get(0)?;
            let attempts: i32 = row.try_get(1)?;
            let object = tx.query_one(
                &format!("SELECT {OBJECT_COLUMNS} FROM drsd_reg_objects o WHERE o.id = $1"),
                &[&id],
            )?;
            Ok(Some(Job {
                id,
                object: object_at(&object, 0)?,
                attempts: attempts.max(0) as u32,
            }))
        })?;
        claimed
            .map(|job| {
                Ok(Job {
                    object: self.reveal(job.object)?,
                    ..job
                })
            })
            .transpose()
    }

    /// Safe to repeat, and to race with a node that took the job over after
    /// this one's lease lapsed: both hashed the same bytes.
    fn job_done(
        &self,
        job: &Job,
        content_oid: &Oid,
        md5: Option<&str>,
        note: Option<&str>,
    ) -> Result<Vec<std::path::PathBuf>, RegistryError> {
        // This node's own evidence first: the shared row is anyone's to write.
        let object = &job.object;
        self.urls
            .keep_hash(&object.provisional_oid, object.size, content_oid)?;
        self.tx("finish a job", |tx| {
            tx.execute(
                "UPDATE drsd_reg_objects SET content_oid = $2, md5 = COALESCE($3, md5),
                    updated_at = $4, content_read = true
                 WHERE id = $1",
                &[&job.id, &content_oid.to_hex(), &md5, &big(now())],
            )?;
            tx.execute(
                &format!(
                    "UPDATE drsd_reg_jobs SET state = 'done', error = $3, updated_at = $2,
                        {UNCLAIMED}
                     WHERE object_id = $1"
                ),
                &[&job.id, &big(now()), &note],
            )?;
            let rows = tx.query(
                "SELECT DISTINCT repo FROM drsd_reg_repo_refs WHERE object_id = $1 AND node = $2",
                &[&job.id, &self.node.name],
            )?;
            rows.iter()
                .map(|r| r.try_get::<_, String>(0).map(std::path::PathBuf::from))
                .collect()
        })
    }

    fn release_claim(&self, job: &Job) -> Result<(), RegistryError> {
        let node = &self.node.name;
        self.tx("release a claim", |tx| {
            tx.execute(
                &format!(
                    "UPDATE drsd_reg_jobs SET state = 'queued', next_at = 0, updated_at = $3,
                        {UNCLAIMED}
                     WHERE object_id = $1 AND state = 'running' AND claimed_by = $2"
                ),
                &[&job.id, node, &big(now())],
            )?;
            Ok(())
        })
    }

    fn job_failed(&self, job: &Job, why: &str, retry_at: Option<u64>) -> Result<(), RegistryError> {
        let state = match retry_at {
            Some(_) => JobState::Retrying,
            None => JobState::Failed,
        };
        self.tx("fail a job", |tx| {
            tx.execute(
                &format!(
                    "UPDATE drsd_reg_jobs SET state = $5, attempts = attempts + 1, error = $2,
                        next_at = $3, updated_at = $4, {UNCLAIMED}
                     WHERE object_id = $1 AND state != 'done'"
                ),
                &[
                    &job.id,
                    &why,
                    &big(retry_at.unwrap_or(0)),
                    &big(now()),
                    &state.as_str(),
                ],
            )?;
            Ok(())
        })
    }

    /// The next waiting job's time; a job running on another node counts as
    /// waiting until its lease ends (by the server's clock), so an idle node
    /// looks again when a dead node's lease would lapse.
    fn next_due_up_to(&self, max_size: u64) -> Result<Option<u64>, RegistryError> {
        let max = big(max_size);
        self.tx("look at the queue", |tx| {
            let row = tx.query_one(
                &format!(
                    "SELECT min(t) FROM (
                    SELECT j.next_at AS t FROM drsd_reg_jobs j
                    JOIN drsd_reg_objects o ON o.id = j.object_id
                    WHERE j.state IN ('queued', 'retrying') AND o.size <= $2
                    UNION ALL
                    SELECT ceil(extract(epoch FROM {lease}))::bigint FROM drsd_reg_jobs j
                    JOIN drsd_reg_objects o ON o.id = j.object_id
                    WHERE j.state = 'running' AND j.claimed_by IS DISTINCT FROM $1
                        AND o.size <= $2
                 ) due",
                    lease = lease_read_back(3)
                ),
                &[&self.node.name, &max, &(self.lease_ms as f64)],
            )?;
            Ok(row.try_get::<_, Option<i64>>(0)?.map(|t| t.max(0) as u64))
        })
    }

    fn job_counts(&self) -> Result<JobCounts, RegistryError> {
        let rows = self.tx("count jobs", |tx| {
            tx.query(
                "SELECT state, count(*) FROM drsd_reg_jobs GROUP BY state",
                &[],
            )
        })?;
        let mut counts = JobCounts::default();
        for row in rows {
            let (state, n): (String, i64) = (row.get(0), row.get(1));
            let n = n as u64;
            // A state this daemon does not know counts as done, as in SQLite.
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

    fn open_jobs(&self, limit: usize) -> Result<Vec<OpenJob>, RegistryError> {
        self.tx("list jobs", |tx| {
            let rows = tx.query(
                "SELECT o.url, o.size, j.state, j.attempts, j.error, j.next_at
                 FROM drsd_reg_jobs j JOIN drsd_reg_objects o ON o.id = j.object_id
                 WHERE j.state != 'done' OR j.error IS NOT NULL
                 ORDER BY j.state = 'done', j.state, o.url LIMIT $1",
                &[&(limit.min(i64::MAX as usize) as i64)],
            )?;
            rows.iter()
                .map(|r| {
                    let state = r.try_get::<_, StateText>(2)?.0;
                    let url: String = r.try_get(0)?;
                    Ok(OpenJob {
                        url: crate::stores::redacted(&url),
                        size: r.try_get::<_, i64>(1)? as u64,
                        retry_at: (state == JobState::Retrying)
                            .then(|| r.try_get::<_, i64>(5))
                            .transpose()?
                            .map(|t| t.max(0) as u64),
                        state,
                        attempts: r.try_get::<_, i32>(3)?.max(0) as u32,
                        error: r.try_get(4)?,
                    })
                })
                .collect()
        })
    }

    fn job_objects(&self, states: &[JobState]) -> Result<Vec<ForeignObject>, RegistryError> {
        let states: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
        let query = format!(
            "SELECT {OBJECT_COLUMNS} FROM drsd_reg_jobs j
             JOIN drsd_reg_objects o ON o.id = j.object_id WHERE j.state = ANY($1)"
        );
        let found = self.tx("list jobs", |tx| {
            tx.query(&query, &[&states])?
                .iter()
                .map(|r| object_at(r, 0))
                .collect::<Result<Vec<_>, _>>()
        })?;
        found.into_iter().map(|o| self.reveal(o)).collect()
    }
}
