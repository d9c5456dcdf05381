//! Which prefetch jobs may still resume a partial download, for the clean-up
//! of partial files (`remote::partials`).

use super::store::{object_at, sql, OBJECT_COLUMNS};
use super::{ForeignObject, JobState, Registry, RegistryError};
use crate::remote::partials;

impl Registry {
    /// The objects of the jobs in any of `states`.
    pub fn job_objects(&self, states: &[JobState]) -> Result<Vec<ForeignObject>, RegistryError> {
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

/// A job's object as the owner of its partial download: the narrow view
/// `remote::partials` names the file by.
impl<'a> From<&'a ForeignObject> for partials::Owner<'a> {
    fn from(object: &'a ForeignObject) -> partials::Owner<'a> {
        partials::Owner {
            url: object.url.expose(),
            etag: &object.etag,
            size: object.size,
        }
    }
}
