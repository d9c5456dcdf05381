//! `drsctl init` as a library call, against real git and Debian's git-lfs.

use std::path::Path;
use std::process::Command;

use drsd::lfs::setup::{init, recorded, recorded_remote, undo, RepoSettings, SetupError, HOOKS};
use drsd_e2e::bin;

/// Settings that record the object remote `url` only.
fn remote(url: &str) -> RepoSettings {
    RepoSettings {
        remote: Some(url.into()),
        ..RepoSettings::default()
    }
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim_end()
        .to_string()
}

fn config(repo: &Path, key: &str) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["config", "--local", "--get", key])
        .output()
        .unwrap();
    out.status.success().then(|| {
        String::from_utf8(out.stdout)
            .unwrap()
            .trim_end()
            .to_string()
    })
}

fn new_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    dir
}

#[test]
fn init_sets_the_agent_and_hooks_once_and_undo_restores_git_lfs() {
    let repo = new_repo();
    let agent = bin("drs-hook");
    let first = init(repo.path(), &agent, &remote("s3://bucket/team")).unwrap();
    assert!(first.changed.len() >= 8, "{:?}", first.changed);
    assert_eq!(
        config(repo.path(), "lfs.standalonetransferagent").as_deref(),
        Some("drs")
    );
    assert_eq!(
        config(repo.path(), "lfs.customtransfer.drs.path"),
        Some(agent.display().to_string())
    );
    assert_eq!(
        config(repo.path(), "lfs.customtransfer.drs.concurrent").as_deref(),
        Some("true")
    );
    assert!(
        config(repo.path(), "filter.lfs.process").is_some(),
        "git lfs install --local ran"
    );
    // git-lfs itself reads the agent from the repo config.
    let env = Command::new("git")
        .arg("-C")
        .arg(repo.path())
        .args(["lfs", "env"])
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&env.stdout),
        String::from_utf8_lossy(&env.stderr),
    );
    assert!(out.contains("drs"), "{out}");
    assert!(
        !err.contains("unsafe"),
        "git-lfs complains about our settings: {err}"
    );
    assert_eq!(
        recorded_remote(repo.path()).unwrap().as_deref(),
        Some("s3://bucket/team")
    );
    // A second remote replaces the first; other attributes stay.
    std::fs::write(
        repo.path().join(".gitattributes"),
        std::fs::read_to_string(repo.path().join(".gitattributes")).unwrap()
            + "*.bam filter=lfs diff=lfs merge=lfs -text\n",
    )
    .unwrap();
    init(repo.path(), &bin("drs-hook"), &remote("s3://other/x")).unwrap();
    assert_eq!(
        recorded_remote(repo.path()).unwrap().as_deref(),
        Some("s3://other/x")
    );
    let attrs = std::fs::read_to_string(repo.path().join(".gitattributes")).unwrap();
    assert!(
        attrs.contains("*.bam filter=lfs") && attrs.matches("drs-remote=").count() == 1,
        "{attrs}"
    );
    let err = init(repo.path(), &bin("drs-hook"), &remote("s3://a b")).unwrap_err();
    assert!(err.to_string().contains("s3://a b"), "{err}");
    init(repo.path(), &bin("drs-hook"), &remote("s3://bucket/team")).unwrap();
    for name in HOOKS {
        let text = std::fs::read_to_string(repo.path().join(".git/hooks").join(name)).unwrap();
        assert!(
            text.contains(&format!("hook {name}")) && text.contains(&agent.display().to_string())
        );
    }
    assert!(
        init(repo.path(), &agent, &remote("s3://bucket/team"))
            .unwrap()
            .changed
            .is_empty(),
        "idempotent"
    );

    let undone = undo(repo.path()).unwrap();
    assert!(!undone.changed.is_empty());
    assert_eq!(config(repo.path(), "lfs.standalonetransferagent"), None);
    assert_eq!(config(repo.path(), "lfs.customtransfer.drs.path"), None);
    let pre_push = std::fs::read_to_string(repo.path().join(".git/hooks/pre-push")).unwrap();
    assert!(
        pre_push.contains("git lfs pre-push") && !pre_push.contains("drs-hook"),
        "{pre_push}"
    );
    assert!(undo(repo.path()).unwrap().changed.is_empty());
}

#[test]
fn a_hook_of_the_user_s_own_is_refused_before_anything_changes() {
    let repo = new_repo();
    let hook = repo.path().join(".git/hooks/pre-push");
    std::fs::write(&hook, "#!/bin/sh\necho mine\n").unwrap();
    let err = init(repo.path(), &bin("drs-hook"), &RepoSettings::default()).unwrap_err();
    assert!(matches!(err, SetupError::ForeignHook { .. }), "{err}");
    assert!(err.to_string().contains("hooks/pre-push"), "{err}");
    assert_eq!(config(repo.path(), "lfs.standalonetransferagent"), None);
    assert_eq!(
        std::fs::read_to_string(&hook).unwrap(),
        "#!/bin/sh\necho mine\n"
    );
}

#[test]
fn init_outside_a_repo_names_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let err = init(dir.path(), &bin("drs-hook"), &RepoSettings::default()).unwrap_err();
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
}

#[test]
fn init_records_the_indexd_and_its_authz_beside_the_remote_and_refuses_bad_ones() {
    let repo = new_repo();
    let settings = RepoSettings {
        remote: Some("s3://bucket/team".into()),
        indexd: Some("https://data.example.org".parse().unwrap()),
        authz: vec!["/programs/p/projects/q".into(), "/programs/p".into()],
        ..RepoSettings::default()
    };
    let report = init(repo.path(), &bin("drs-hook"), &settings).unwrap();
    assert!(
        report
            .changed
            .iter()
            .any(|c| c.contains("drs-indexd=https://data.example.org")),
        "{:?}",
        report.changed
    );
    assert_eq!(recorded(repo.path()).unwrap(), settings);
    let attrs = std::fs::read_to_string(repo.path().join(".gitattributes")).unwrap();
    assert!(
        attrs.contains("drs-authz=/programs/p/projects/q,/programs/p"),
        "{attrs}"
    );
    // A hand-edited bad value is refused by name, not used.
    std::fs::write(
        repo.path().join(".gitattributes"),
        attrs.replace("https://data.example.org", "ftp://x"),
    )
    .unwrap();
    let err = recorded(repo.path()).unwrap_err().to_string();
    assert!(err.contains("ftp://x"), "{err}");
}
