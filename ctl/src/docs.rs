//! `drsctl completions SHELL` and `drsctl man DIR`: shell completion scripts
//! and man pages generated from the clap definition, so they never drift
//! from `--help`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;

use crate::exit::Failure;
use crate::output::Output;

/// Prints the completion script for `shell` on standard output.
pub fn completions(shell: clap_complete::Shell) -> Result<(), Failure> {
    let mut command = crate::Cli::command();
    clap_complete::generate(shell, &mut command, "drsctl", &mut std::io::stdout());
    Ok(())
}

#[derive(serde::Serialize)]
struct Written {
    pages: Vec<PathBuf>,
}

/// Writes drsctl.1 and one page per subcommand into `dir`.
pub fn man(dir: &Path, out: &Output) -> Result<(), Failure> {
    let pages = write_man_pages(dir)?;
    let written = Written { pages };
    out.show(&written, || {
        println!(
            "wrote {} man pages to {}",
            written.pages.len(),
            dir.display()
        )
    });
    Ok(())
}

/// drsctl's man pages in `dir` (created if missing); the files written.
pub fn write_man_pages(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let command = crate::Cli::command().name("drsctl");
    clap_mangen::generate_to(command, dir)
        .with_context(|| format!("writing man pages to {}", dir.display()))?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("drsctl") && n.ends_with(".1"))
        })
        .collect();
    pages.sort();
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every subcommand's name, nested ones too.
    fn subcommands(command: &clap::Command) -> Vec<String> {
        let mut names = Vec::new();
        for sub in command.get_subcommands() {
            names.push(sub.get_name().to_string());
            names.extend(subcommands(sub));
        }
        names
    }

    #[test]
    fn the_bash_script_completes_every_subcommand() {
        let mut command = crate::Cli::command();
        let mut script = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut command,
            "drsctl",
            &mut script,
        );
        let script = String::from_utf8(script).unwrap();
        let names = subcommands(&crate::Cli::command());
        assert!(names.contains(&"add-url".to_string()) && names.contains(&"list".to_string()));
        for name in names {
            assert!(script.contains(&name), "the bash script lacks {name}");
        }
    }

    #[test]
    fn the_man_pages_name_every_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        let pages = super::write_man_pages(dir.path()).unwrap();
        let main = std::fs::read_to_string(dir.path().join("drsctl.1")).unwrap();
        assert!(
            main.starts_with(".ie") || main.contains(".TH drsctl"),
            "{main}"
        );
        for sub in crate::Cli::command().get_subcommands() {
            let name = sub.get_name();
            // roff writes a hyphen as `\-`.
            let roff = name.replace('-', "\\-");
            assert!(main.contains(&roff), "drsctl.1 does not name {name}");
            let page = dir.path().join(format!("drsctl-{name}.1"));
            assert!(pages.contains(&page), "no page {}", page.display());
        }
        let repos = std::fs::read_to_string(dir.path().join("drsctl-repos-add.1")).unwrap();
        assert!(repos.contains("PATH"), "{repos}");
    }
}
