//! `drsctl`: the user's command line, a thin client of the drsd daemon.

use anyhow::Result;
use clap::Parser;

#[derive(Parser)]
#[command(
    version,
    about = "drsctl: add remote objects to Git LFS repos and drive the drsd daemon",
    long_about = "drsctl talks to the per-user drsd daemon. Commands arrive with the daemon's socket protocol."
)]
struct Cli {}

fn main() -> Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
