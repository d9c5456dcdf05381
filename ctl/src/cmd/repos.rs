use std::path::{Path, PathBuf};

use anyhow::Context;
use drsd_proto::RepoReport;

use crate::exit::Failure;
use crate::output::{repo_table, Output};

pub async fn add(socket: &Path, path: Option<PathBuf>, out: &Output) -> Result<(), Failure> {
    let path = absolute(path)?;
    let repo = super::connect(socket).await?.repos_add(path).await?;
    show_repo(&repo, "registered", out);
    Ok(())
}

pub async fn remove(socket: &Path, path: Option<PathBuf>, out: &Output) -> Result<(), Failure> {
    let path = absolute(path)?;
    let repo = super::connect(socket).await?.repos_remove(path).await?;
    show_repo(&repo, "unregistered", out);
    Ok(())
}

pub async fn list(socket: &Path, out: &Output) -> Result<(), Failure> {
    let repos = super::connect(socket).await?.repos_list().await?;
    out.show(&repos, || repo_table(&repos));
    Ok(())
}

fn show_repo(repo: &RepoReport, done: &str, out: &Output) {
    out.show(repo, || {
        println!("{done} {}", repo.path.display());
        repo_table(std::slice::from_ref(repo));
    });
}

/// The daemon runs elsewhere: send it absolute paths.
fn absolute(path: Option<PathBuf>) -> Result<PathBuf, Failure> {
    let path = path.unwrap_or_else(|| PathBuf::from("."));
    let path = std::path::absolute(&path)
        .with_context(|| format!("making {} absolute", path.display()))?;
    Ok(path)
}
