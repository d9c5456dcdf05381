//! `drs-hook`: what git and git-lfs call; a thin client of the drsd daemon.

use anyhow::Result;
use clap::Parser;

#[derive(Parser)]
#[command(
    version,
    about = "drs-hook: git hook entry point and git-lfs transfer agent for drsd",
    long_about = "Installed by `drsctl init`; git and git-lfs run it, it relays to the drsd daemon."
)]
struct Cli {}

fn main() -> Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
