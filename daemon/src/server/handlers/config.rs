//! `config`: the settings the daemon was started with and where each came
//! from (flag, environment, settings file, default), secrets as `<set>`.

use super::Shared;
use drsd_proto::Reply;

pub(crate) fn handle(shared: &Shared) -> Reply {
    Reply::Config(shared.config.settings.report())
}
