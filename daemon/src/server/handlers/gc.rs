//! `gc`: deletes the pool entries no registered repo can need (`ops::gc`),
//! with a progress event before the repos are read.

use super::{Progressor, Shared};
use crate::ops::gc::Sweep;
use drsd_proto::{Progress, Reply, WireError};

pub(crate) async fn handle(
    shared: &Shared,
    sweep: Sweep,
    progress: &Progressor,
) -> Result<Reply, WireError> {
    let plan = shared.gc.plan(sweep)?;
    progress
        .send(Progress {
            stage: drsd_proto::Stage::Gc,
            done: 0,
            total: None,
            message: Some(format!("reading the objects of {} repo(s)", plan.repos())),
        })
        .await;
    Ok(Reply::Gc(shared.gc.run(plan).await?))
}
