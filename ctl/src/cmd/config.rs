//! `drsctl config`: the settings in force in the running daemon and where
//! each came from (a flag, the environment, the settings file, the
//! default); secrets as `<set>`, never their value. `--path`: where the
//! settings file is, without asking (or starting) a daemon, so a file the
//! daemon refuses to start with can still be found and fixed.

use std::path::Path;

use drsd_proto::{ConfigReport, SettingSource};
use serde::Serialize;

use crate::exit::Failure;
use crate::output::Output;

pub async fn run(socket: &Path, out: &Output) -> Result<(), Failure> {
    let mut client = super::connect(socket).await?;
    let report = client.config().await?;
    out.show(&report, || print(&report));
    Ok(())
}

#[derive(Serialize)]
struct ShownPath {
    path: std::path::PathBuf,
}

/// `DRSD_CONFIG`, else `$XDG_CONFIG_HOME/drsd/config.toml`.
pub fn path(out: &Output) -> Result<(), Failure> {
    let path = drsd_proto::config_path()
        .ok_or_else(|| anyhow::anyhow!("no home folder, so no settings file: set DRSD_CONFIG"))?;
    let shown = ShownPath { path };
    out.show(&shown, || println!("{}", shown.path.display()));
    Ok(())
}

fn print(report: &ConfigReport) {
    match (&report.file, report.file_read) {
        (Some(file), true) => println!("settings file  {}", file.display()),
        (Some(file), false) => println!(
            "settings file  {} (not there: defaults apply)",
            file.display()
        ),
        (None, _) => println!("settings file  none"),
    }
    let key_width = width(report.settings.iter().map(|l| l.key.len()), 7);
    let value_width = width(report.settings.iter().map(|l| l.value.len()), 5).min(40);
    println!(
        "  {:<key_width$}  {:<value_width$}  from",
        "setting", "value"
    );
    for line in &report.settings {
        println!(
            "  {:<key_width$}  {:<value_width$}  {}",
            line.key,
            line.value,
            source(&line.source)
        );
    }
}

fn width(lengths: impl Iterator<Item = usize>, least: usize) -> usize {
    lengths.max().unwrap_or(least).max(least)
}

fn source(source: &SettingSource) -> String {
    match source {
        SettingSource::File { .. } => "file".into(),
        other => other.to_string(),
    }
}
