//! `drsctl`: the user's command line, a thin client of the drsd daemon.

mod cmd;
mod docs;
mod exit;
mod output;
mod service;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use exit::Failure;

#[derive(Parser)]
#[command(
    version,
    about = "drsctl: add remote objects to Git LFS repos and drive the drsd daemon",
    long_about = "drsctl talks to the per-user drsd daemon over its local socket, starting \
the daemon when none answers (unless DRSD_NO_AUTOSTART=1).",
    after_help = "Exit codes:\n  0  done\n  1  the command ran and failed, or found a problem \
(a bad pool entry, an unknown repo)\n  2  bad usage\n  3  no daemon reachable (not running and not \
started, or it failed to start)\n  4  the daemon spoke a protocol this drsctl cannot read (version mismatch)"
)]
struct Cli {
    /// Machine-readable JSON on standard output instead of tables
    #[arg(long, global = true)]
    json: bool,
    #[command(flatten)]
    socket: drsd_proto::paths::SocketArg,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The daemon, the pool per tier, registered repos, the job queue
    Status,
    /// Set a repo up for drsd: git-lfs uses our transfer agent, hooks tell
    /// the daemon, the daemon watches it. Idempotent.
    #[command(group(clap::ArgGroup::new("registry").args(["indexd", "gen3"])))]
    Init {
        /// The repo [default: the current folder]
        #[arg(value_name = "PATH")]
        path: Option<PathBuf>,
        /// Record the object remote in .gitattributes, for every clone:
        /// s3://bucket/prefix, or a folder (file:///shared/objects or an
        /// absolute path); checked first, and replacing the one recorded
        #[arg(long)]
        remote: Option<String>,
        /// Remove the object remote recorded in .gitattributes
        #[arg(long, conflicts_with = "remote")]
        no_remote: bool,
        /// Record the Gen3 Indexd (https://host) that pushes register objects
        /// with, in .gitattributes: a push skips what Indexd holds and registers the rest
        #[arg(long, value_name = "URL")]
        indexd: Option<String>,
        /// Make the Gen3 commons at URL (https://host: Indexd at URL/index,
        /// DRS at URL/ga4gh/drs/v1, Fence at URL/user) the object remote, in
        /// .gitattributes as drs-remote=gen3+URL: pushes upload through Fence
        /// with the Gen3 API key of DRSD_GEN3_CREDENTIALS (sent only to the
        /// commons that issued it, or a server named in DRSD_DRS_SERVERS);
        /// needs --authz /programs/P/projects/Q
        #[arg(long, value_name = "URL", conflicts_with_all = ["remote", "no_remote", "indexd"], requires = "authz")]
        gen3: Option<String>,
        /// Indexd authz resources for new records (/programs/P/projects/Q, comma-separated)
        #[arg(long, value_name = "PATHS", requires = "registry")]
        authz: Option<String>,
        /// Put git-lfs's own setup back and unregister the repo
        #[arg(long, conflicts_with_all = ["remote", "indexd", "no_remote", "gen3"])]
        undo: bool,
    },
    /// Clone a repo without smudging, set it up, fetch its objects through drsd, check out
    Clone {
        /// The repo to clone: any URL or path `git clone` takes
        #[arg(value_name = "URL")]
        url: String,
        /// The folder to clone into [default: the repo's name, as git clone chooses]
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Add a remote object (s3://bucket/key or https://...) to the repo by
    /// URL: one HEAD, never a read of its content; writes a Git LFS pointer
    /// at PATH, tracks PATH with git-lfs and stages it. `--from FILE` adds a
    /// list of them; `--manifest FILE [DIR]` the objects of a Gen3 data
    /// portal's manifest, as drs:// ids. Also `git drs add-url` (see README).
    AddUrl {
        /// The object's URL (or use --from); with --manifest, the folder
        /// the manifest's files go in [default: the current folder]
        #[arg(
            required_unless_present_any = ["from", "manifest"],
            conflicts_with = "from",
            value_name = "URL"
        )]
        url: Option<String>,
        /// Where the pointer goes [default: the URL's file name, in the current folder]
        #[arg(conflicts_with_all = ["from", "manifest"], value_name = "PATH")]
        path: Option<PathBuf>,
        /// A file of `URL [PATH]` lines, `-` for standard input (blank lines and
        /// # comments skipped; lines up to 64 KiB): read here and sent in batches
        /// of up to 1,000, HEADs run concurrently, one staging step per batch;
        /// failed lines are named by number and the rest still added (exit 1 if any failed)
        #[arg(long, value_name = "FILE", conflicts_with = "manifest")]
        from: Option<PathBuf>,
        /// A Gen3 manifest, as a data portal exports it (a JSON list of
        /// {object_id, file_name, file_size, md5sum, commons_url, ...}; `-`
        /// for standard input), checked whole first: a bad entry (named by
        /// its place, from 1) adds nothing. Each object_id is added as the
        /// drs:// id of its commons at DIR/file_name (give DIR in URL's
        /// place); file_size and md5sum are what the object must be
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        /// The Gen3 commons of the manifest's objects that name no
        /// commons_url [default: the repo's --gen3 object remote]
        #[arg(long, value_name = "URL", requires = "manifest")]
        commons: Option<String>,
        /// The content's sha256, when you know it: the pointer then carries it
        #[arg(long, value_name = "HEX", conflicts_with_all = ["from", "manifest"])]
        sha256: Option<String>,
        /// Replace a file at PATH that is not an LFS pointer
        #[arg(long)]
        force: bool,
        /// Do not prefetch and hash the object here: its pointer stays provisional
        #[arg(long)]
        no_fetch: bool,
    },
    /// Rewrite provisional pointers (oid from an ETag) whose objects were
    /// hashed into content pointers, in the work tree and the index, for you
    /// to commit. Staged, uncommitted ones are promoted on their own.
    Promote {
        /// The pointer files to promote
        #[arg(
            required_unless_present = "all",
            conflicts_with = "all",
            value_name = "PATH"
        )]
        paths: Vec<PathBuf>,
        /// Every provisional pointer of the repo
        #[arg(long)]
        all: bool,
        /// Wait for the objects' hashes (prefetch), then promote; ends when
        /// nothing waited for can still change, with exit 1 naming each
        /// object whose prefetch failed for good
        #[arg(long)]
        wait: bool,
        /// First queue again the prefetch jobs of these pointers that failed
        /// for good (after fixing the cause: a URL, a server, credentials)
        #[arg(long)]
        retry: bool,
    },
    /// Queue the prefetch (download and hash) of objects added with
    /// --no-fetch, so that their pointers can be promoted; a job that failed
    /// for good is queued again with fresh tries
    Fetch {
        /// The pointer files whose objects to fetch
        #[arg(
            required_unless_present = "all",
            conflicts_with = "all",
            value_name = "PATH"
        )]
        paths: Vec<PathBuf>,
        /// Every provisional pointer of the repo
        #[arg(long)]
        all: bool,
    },
    /// Register, unregister and list the repos the daemon watches
    #[command(subcommand)]
    Repos(ReposCommand),
    /// Work on the content pool
    #[command(subcommand)]
    Pool(PoolCommand),
    /// Delete the pool entries that no registered repo references in any
    /// ref, index, stash or worktree (nor a foreign object it points at).
    /// Repos' own copies in .git/lfs/objects are never touched
    ///
    /// An entry goes only once no repo has referenced it for the grace
    /// period; with no repo registered (a lost repos.json looks the same)
    /// gc refuses unless --force
    Gc {
        /// List what would be removed, remove nothing
        #[arg(long)]
        dry_run: bool,
        /// Sweep even when no repo is registered
        #[arg(long)]
        force: bool,
        /// How long an entry stays after a gc last saw a repo reference it
        /// (or after it was first seen): 30s, 90m, 24h, 7d; 0 sweeps at once
        #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = cmd::gc::parse_grace)]
        grace: u64,
    },
    /// Free disk: remove this machine's copies (the repos' .git/lfs/objects
    /// and the pool's entries) of the objects nothing here needs, each only
    /// once it is proven present in N places other than this machine (the
    /// object remote: its bytes hashed, or a content-derived ETag checked)
    ///
    /// Needed, never pruned: what is checked out, staged or stashed, what an
    /// unpushed commit names, every branch and tag tip, and what git-lfs
    /// calls recent (lfs.fetchrecentrefsdays, lfs.fetchrecentcommitsdays,
    /// lfs.pruneoffsetdays, as `git lfs prune` reads them). A freed object
    /// comes back on checkout or `git lfs pull`
    Prune {
        /// The repos to free [default: every registered repo]
        #[arg(value_name = "REPO")]
        repos: Vec<PathBuf>,
        /// List what would be freed and where its copies were proven; free nothing
        #[arg(long)]
        dry_run: bool,
        /// The places other than this machine each object must be proven in
        #[arg(long, value_name = "N", default_value_t = drsd_proto::PRUNE_COPIES,
              value_parser = clap::value_parser!(u32).range(1..))]
        copies: u32,
    },
    /// A lab's team mode: the nodes sharing one pool
    #[command(subcommand)]
    Team(TeamCommand),
    /// Stop the daemon (it drains requests in flight first)
    Shutdown,
    /// The settings in force in the daemon and where each came from (flag,
    /// env, the settings file, default); secrets shown as <set>
    Config {
        /// Print the settings file's path instead (DRSD_CONFIG, else
        /// $XDG_CONFIG_HOME/drsd/config.toml); needs no daemon
        #[arg(long)]
        path: bool,
    },
    /// Install or remove the systemd user unit / launchd agent
    #[command(subcommand)]
    Service(service::ServiceCommand),
    /// Print the shell completion script for SHELL (see README: loading completions)
    Completions {
        /// The shell to complete in
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Write drsctl's man pages (drsctl.1, drsctl-status.1, ...) into DIR
    Man {
        /// The folder to write them to (e.g. ~/.local/share/man/man1)
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

#[derive(Subcommand)]
enum ReposCommand {
    /// Watch the repo containing PATH (default: the current folder)
    Add {
        /// A folder in the repo [default: the current folder]
        #[arg(value_name = "PATH")]
        path: Option<PathBuf>,
    },
    /// Stop watching a repo (works for a deleted repo too)
    Remove {
        /// A folder in the repo, or where a deleted repo was [default: the current folder]
        #[arg(value_name = "PATH")]
        path: Option<PathBuf>,
    },
    /// The registered repos and their last scan (when, and what it found)
    List,
}

#[derive(Subcommand)]
enum TeamCommand {
    /// Remove the roots a node gone for good published, so a gc on the
    /// shared pool no longer keeps what its repos held
    Forget {
        /// The node's name, as `drsctl status` lists the team's nodes
        #[arg(value_name = "NODE")]
        node: String,
    },
    /// Copy this machine's own pool and registry into the team's (run with
    /// the daemon in team mode; a second run copies nothing)
    Join,
    /// Copy back into this machine's own pool and registry what its repos
    /// need, so they work once team_db is removed
    Leave,
}

#[derive(Subcommand)]
enum PoolCommand {
    /// Re-hash every entry and name the bad ones (exit 1 if any)
    Verify,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return Failure::usage(e, std::env::args().any(|a| a == "--json")),
    };
    let json = cli.json;
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(json),
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    let socket = cli.socket.path();
    let out = output::Output { json: cli.json };
    let command = match cli.command {
        Command::Service(command) => return service::run(command, &out),
        Command::Completions { shell } => return docs::completions(shell),
        Command::Man { dir } => return docs::man(&dir, &out),
        Command::Config { path: true } => return cmd::config::path(&out),
        command => command,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other(anyhow::anyhow!("starting the async runtime: {e}")))?;
    runtime.block_on(async {
        match command {
            Command::Status => cmd::status::run(&socket, &out).await,
            Command::Init {
                path,
                remote,
                no_remote,
                indexd,
                gen3,
                authz,
                undo,
            } => {
                let settings = cmd::init::Settings {
                    remote: gen3.map(|url| format!("gen3+{url}")).or(remote),
                    no_remote,
                    indexd,
                    authz,
                };
                cmd::init::init(&socket, path, settings, undo, &out).await
            }
            Command::Clone { url, dir } => cmd::init::clone(&socket, &url, dir, &out).await,
            Command::Repos(ReposCommand::Add { path }) => {
                cmd::repos::add(&socket, path, &out).await
            }
            Command::Repos(ReposCommand::Remove { path }) => {
                cmd::repos::remove(&socket, path, &out).await
            }
            Command::Repos(ReposCommand::List) => cmd::repos::list(&socket, &out).await,
            Command::Pool(PoolCommand::Verify) => cmd::pool::verify(&socket, &out).await,
            Command::AddUrl {
                url,
                path,
                from,
                manifest,
                commons,
                sha256,
                force,
                no_fetch,
            } => {
                let args = cmd::add_url::AddUrlArgs {
                    no_fetch,
                    url,
                    path,
                    from,
                    manifest,
                    commons,
                    sha256,
                    force,
                };
                cmd::add_url::run(&socket, args, &out).await
            }
            Command::Promote {
                paths,
                all,
                wait,
                retry,
            } => {
                let args = cmd::promote::Args {
                    paths,
                    all,
                    wait,
                    retry,
                };
                cmd::promote::run(&socket, args, &out).await
            }
            Command::Gc {
                dry_run,
                force,
                grace,
            } => cmd::gc::run(&socket, dry_run, force, grace, &out).await,
            Command::Prune {
                repos,
                dry_run,
                copies,
            } => {
                let args = cmd::prune::Args {
                    repos,
                    dry_run,
                    copies,
                };
                cmd::prune::run(&socket, args, &out).await
            }
            Command::Fetch { paths, all } => cmd::fetch::run(&socket, paths, all, &out).await,
            Command::Team(TeamCommand::Forget { node }) => {
                cmd::team::forget(&socket, node, &out).await
            }
            Command::Team(TeamCommand::Join) => cmd::team::join(&socket, &out).await,
            Command::Team(TeamCommand::Leave) => cmd::team::leave(&socket, &out).await,
            Command::Shutdown => cmd::shutdown::run(&socket, &out).await,
            Command::Config { .. } => cmd::config::run(&socket, &out).await,
            Command::Service(_) | Command::Completions { .. } | Command::Man { .. } => {
                unreachable!("handled above")
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn every_positional_argument_has_a_help_line() {
        let missing = drsd_proto::cli::undocumented_positionals(&super::Cli::command());
        assert!(missing.is_empty(), "no help: {missing:?}");
    }

    #[test]
    fn commands_that_never_reach_the_daemon_offer_no_socket() {
        let cli = super::Cli::command();
        for name in ["service", "completions", "man"] {
            let sub = cli.find_subcommand(name).unwrap();
            let mut all = vec![sub];
            all.extend(sub.get_subcommands());
            for c in all {
                assert!(c.get_arguments().all(|a| a.get_id() != "socket"), "{name}");
            }
        }
        super::Cli::command().debug_assert();
    }
}
