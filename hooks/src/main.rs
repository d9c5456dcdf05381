//! `drs-hook`: what git and git-lfs call; a thin client of the drsd daemon.
//! `drs-hook agent` is git-lfs's custom transfer agent; `drs-hook hook NAME`
//! is what the git hooks installed by `drsctl init` run; `drs-hook
//! filter-process` is the clean filter `drsctl clone` has git refresh its
//! index with.

mod agent;
mod filter;
mod hook;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use drsd_proto::{connect_or_start, Autostart};

#[derive(Parser)]
#[command(
    version,
    about = "drs-hook: git hook entry point and git-lfs transfer agent for drsd",
    long_about = "drs-hook: git hook entry point and git-lfs custom transfer agent for drsd.\n\nInstalled by `drsctl init`; git and git-lfs run it, it relays to the drsd daemon \
over its socket, starting the daemon when none answers (unless DRSD_NO_AUTOSTART=1)."
)]
struct Cli {
    #[command(flatten)]
    socket: drsd_proto::paths::SocketArg,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Connect to the daemon (starting it if needed) and print its version
    Ping,
    /// Speak git-lfs's custom transfer protocol on stdin/stdout, relaying each
    /// transfer to the daemon (set up by `drsctl init` as `lfs.customtransfer.drs`)
    Agent,
    /// Run as git hook NAME: tell the daemon, then run `git lfs NAME` with the same arguments
    Hook {
        /// The hook git runs (pre-push, post-checkout, post-commit, post-merge)
        #[arg(value_name = "NAME")]
        name: String,
        /// The arguments git gave the hook, passed on to `git lfs NAME`
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<String>,
    },
    /// Clean files for git the way git-lfs does (git's long-running filter
    /// protocol on stdin/stdout), storing nothing: what `drsctl clone` has git
    /// refresh the index with after writing the files from the pool
    FilterProcess,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(error) => {
            // Not anyhow's own report: its `Caused by:` list would repeat
            // causes our errors already name.
            eprintln!("drs-hook: {}", drsd_proto::one_line(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let socket = cli.socket.path();
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    match cli.command {
        Command::Ping => runtime()?.block_on(async {
            let client = connect_or_start(
                &socket,
                concat!("drs-hook ", env!("CARGO_PKG_VERSION")),
                Some(&Autostart::from_env()),
            )
            .await?;
            println!("{} on {}", client.server(), socket.display());
            Ok(ExitCode::SUCCESS)
        }),
        Command::Agent => runtime()?
            .block_on(agent::run(&socket))
            .map(|()| ExitCode::SUCCESS),
        Command::Hook { name, args } => runtime()?.block_on(hook::run(&socket, &name, &args)),
        // No daemon and no runtime: git waits on every file it cleans.
        Command::FilterProcess => {
            let stamped = filter::Stamped::from_env()?;
            filter::run(std::io::stdin().lock(), std::io::stdout().lock(), &stamped)
                .map(|()| ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn every_positional_argument_has_a_help_line() {
        let missing = drsd_proto::cli::undocumented_positionals(&super::Cli::command());
        assert!(missing.is_empty(), "no help: {missing:?}");
    }
}
