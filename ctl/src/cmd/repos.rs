use std::path::{Path, PathBuf};

use anyhow::Context;
use drsd::ipc::{Reply, Request};

use crate::exit::Failure;
use crate::output::{repo_table, Output};

pub async fn add(socket: &Path, path: Option<PathBuf>, out: &Output) -> Result<(), Failure> {
    let path = absolute(path)?;
    one_repo(socket, Request::ReposAdd { path }, "registered", out).await
}

pub async fn remove(socket: &Path, path: Option<PathBuf>, out: &Output) -> Result<(), Failure> {
    let path = absolute(path)?;
    one_repo(socket, Request::ReposRemove { path }, "unregistered", out).await
}

pub async fn list(socket: &Path, out: &Output) -> Result<(), Failure> {
    let mut client = super::connect(socket).await?;
    let Reply::Repos { repos } = client.call(Request::ReposList).await? else {
        return Err(anyhow::anyhow!("the daemon answered repos list with something else").into());
    };
    out.show(&repos, || repo_table(&repos));
    Ok(())
}

async fn one_repo(
    socket: &Path,
    request: Request,
    done: &str,
    out: &Output,
) -> Result<(), Failure> {
    let mut client = super::connect(socket).await?;
    let Reply::Repo { repo } = client.call(request).await? else {
        return Err(anyhow::anyhow!("the daemon answered with something else than a repo").into());
    };
    out.show(&repo, || {
        println!("{done} {}", repo.path.display());
        repo_table(std::slice::from_ref(&repo));
    });
    Ok(())
}

/// The daemon runs elsewhere: send it absolute paths.
fn absolute(path: Option<PathBuf>) -> Result<PathBuf, Failure> {
    let path = path.unwrap_or_else(|| PathBuf::from("."));
    let path = std::path::absolute(&path)
        .with_context(|| format!("making {} absolute", path.display()))?;
    Ok(path)
}
