//! Where a prefetch job stands, as the queue stores it and `drsctl` shows
//! it. The stored strings are the schema's (older registries hold them):
//! [`JobState::as_str`] is the one place that spells them.

use std::fmt;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

/// A prefetch job's state (see `queue` for what each means).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobState {
    /// Due at its `next_at`.
    Queued,
    /// A worker has it.
    Running,
    /// Failed; tried again at its `next_at`, after a backoff.
    Retrying,
    /// Failed for good, until `drsctl promote --retry`.
    Failed,
    /// Hashed and stored.
    Done,
    /// Over the size limit: not fetched until a larger limit.
    Held,
    /// `add-url --no-fetch`.
    Skipped,
}

impl JobState {
    pub const ALL: [JobState; 7] = [
        JobState::Queued,
        JobState::Running,
        JobState::Retrying,
        JobState::Failed,
        JobState::Done,
        JobState::Held,
        JobState::Skipped,
    ];

    /// The state as the registry stores it and the wire carries it.
    pub const fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Retrying => "retrying",
            JobState::Failed => "failed",
            JobState::Done => "done",
            JobState::Held => "held",
            JobState::Skipped => "skipped",
        }
    }

    /// The state spelt `text`, if it is one.
    pub fn parse(text: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether a worker will not take the job up by itself: only a user's
    /// action (a larger size limit, `drsctl promote --retry`) changes it.
    pub const fn is_settled(self) -> bool {
        matches!(self, JobState::Failed | JobState::Held | JobState::Skipped)
    }
}

/// The wire's state: the same names, plus `hashed`, which no job row holds.
impl From<JobState> for drsd_proto::JobState {
    fn from(state: JobState) -> drsd_proto::JobState {
        use drsd_proto::JobState as Wire;
        match state {
            JobState::Queued => Wire::Queued,
            JobState::Running => Wire::Running,
            JobState::Retrying => Wire::Retrying,
            JobState::Failed => Wire::Failed,
            JobState::Done => Wire::Done,
            JobState::Held => Wire::Held,
            JobState::Skipped => Wire::Skipped,
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl ToSql for JobState {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(
            self.as_str().as_bytes(),
        )))
    }
}

impl FromSql for JobState {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let text = value.as_str()?;
        JobState::parse(text).ok_or_else(|| {
            FromSqlError::Other(format!("{text:?} is not a prefetch job state").into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_reads_back_from_its_own_spelling_and_the_settled_ones_are_listed() {
        for state in JobState::ALL {
            assert_eq!(JobState::parse(state.as_str()), Some(state));
            assert_eq!(state.to_string(), state.as_str());
            let wire = drsd_proto::JobState::from(state);
            assert_eq!(state.is_settled(), wire.is_settled());
            assert_eq!(
                state.as_str(),
                wire.as_str(),
                "the same spelling on the wire"
            );
        }
        assert_eq!(JobState::parse("hashed"), None);
    }

    #[test]
    fn a_state_round_trips_through_sqlite_and_an_unknown_one_is_refused() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let back: JobState = conn
            .query_row("SELECT ?1", [JobState::Retrying], |r| r.get(0))
            .unwrap();
        assert_eq!(back, JobState::Retrying);
        let bad = conn.query_row("SELECT 'lost'", [], |r| r.get::<_, JobState>(0));
        assert!(bad.is_err());
    }
}
