//! The settings file end to end: a daemon whose environment holds no AWS_*
//! variable reaches Ceph RGW with the endpoint and keys of its settings
//! file, `drsctl config` says where each setting came from without showing
//! the secret, and a file holding a secret that others may read stops the
//! daemon with the chmod to run. Run under tests/with-servers.sh.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use drsd_e2e::{bin, fresh_home, rt, spawn_ready};

use super::add_url::{git, s3, text};

/// A daemon of our own, killed when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cmd` with no AWS_* variable: whatever reaches S3 must come from the file.
fn without_aws(cmd: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AWS_") {
            cmd.env_remove(name);
        }
    }
    cmd
}

fn env(dir: &Path, config: &Path) -> Vec<(&'static str, PathBuf)> {
    vec![
        ("DRSD_SOCKET", dir.join("run/drsd.sock")),
        ("DRSD_POOL", dir.join("pool")),
        ("DRSD_STATE_DIR", dir.join("state")),
        ("DRSD_NO_AUTOSTART", "1".into()),
        ("DRSD_CONFIG", config.to_path_buf()),
    ]
}

fn drsd(dir: &Path, config: &Path) -> Command {
    let mut cmd = Command::new(bin("drsd"));
    without_aws(&mut cmd)
        .args(["serve", "--ready"])
        .envs(env(dir, config));
    cmd
}

/// The RGW endpoint and keys of the test servers, as a settings file.
fn s3_settings(secret: &str) -> String {
    let var = |name: &str| std::env::var(name).expect("run under tests/with-servers.sh");
    format!(
        "prefetch_max_size = 0\n\n[s3]\nendpoint = {:?}\nregion = {:?}\naccess_key_id = {:?}\nsecret_access_key = {secret:?}\n",
        var("AWS_ENDPOINT_URL"),
        std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
        var("AWS_ACCESS_KEY_ID"),
    )
}

fn write_settings(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_daemon_reaches_rgw_with_the_s3_settings_of_its_file_alone() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path();
    fresh_home(dir);
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY").expect("run under tests/with-servers.sh");
    let config = dir.join("config.toml");
    write_settings(&config, &s3_settings(&secret), 0o600);
    let bucket = format!("config-{}", std::process::id());
    let c = s3();
    rt().block_on(async {
        c.create_bucket(&bucket).await?;
        c.put(&bucket, "cohort/reads.bam", vec![3u8; 4096].into())
            .await
    })
    .unwrap();
    let _daemon = Daemon(spawn_ready(drsd(dir, &config).stderr(Stdio::inherit())));
    let drsctl = |cwd: &Path, args: &[&str]| {
        let out = without_aws(&mut Command::new(bin("drsctl")))
            .current_dir(cwd)
            .arg("--json")
            .args(args)
            .envs(env(dir, &config))
            .output()
            .unwrap();
        assert!(out.status.success(), "drsctl {args:?}: {}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    };

    // The add-url HEADs the object in RGW: the endpoint and keys are the file's.
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let url = format!("s3://{bucket}/cohort/reads.bam");
    let added: serde_json::Value =
        serde_json::from_str(&drsctl(&repo, &["add-url", &url, "reads.bam"])).unwrap();
    assert_eq!(added["added"][0]["size"], 4096, "{added}");

    let shown = drsctl(dir, &["config"]);
    assert!(!shown.contains(&secret), "the secret is shown: {shown}");
    let report: serde_json::Value = serde_json::from_str(&shown).unwrap();
    let line = |key: &str| {
        report["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["key"] == key)
            .unwrap_or_else(|| panic!("no {key} in {report}"))
            .clone()
    };
    let from_file = serde_json::json!({"kind": "file", "path": config});
    assert_eq!(line("s3.endpoint")["source"], from_file, "{report}");
    assert_eq!(line("s3.access_key_id")["source"], from_file, "{report}");
    assert_eq!(line("s3.secret_access_key")["value"], "<set>", "{report}");
    assert_eq!(
        line("pool")["source"],
        serde_json::json!({"kind": "environment", "var": "DRSD_POOL"})
    );
    assert_eq!(line("prefetch_jobs")["source"]["kind"], "default");
    assert_eq!(report["file"], serde_json::json!(config), "{report}");

    // The table says the same, without the secret.
    let out = without_aws(&mut Command::new(bin("drsctl")))
        .arg("config")
        .envs(env(dir, &config))
        .output()
        .unwrap();
    let table = text(&out);
    assert!(
        out.status.success() && table.contains("s3.endpoint"),
        "{table}"
    );
    assert!(!table.contains(&secret), "{table}");
}

#[test]
fn a_settings_file_with_a_secret_others_may_read_stops_the_daemon_with_the_chmod_to_run() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path();
    fresh_home(dir);
    let config = dir.join("config.toml");
    write_settings(&config, &s3_settings("a-secret-value"), 0o644);
    let out = drsd(dir, &config).output().unwrap();
    let shown = text(&out);
    assert!(!out.status.success(), "{shown}");
    assert!(
        shown.contains(&format!("chmod 600 {}", config.display())),
        "{shown}"
    );
    assert!(!shown.contains("a-secret-value"), "{shown}");

    // A typo is no better: the daemon names the file and the key.
    write_settings(&config, "[s3]\nendpiont = \"http://x\"\n", 0o600);
    let out = drsd(dir, &config).output().unwrap();
    let shown = text(&out);
    assert!(!out.status.success(), "{shown}");
    assert!(
        shown.contains("`s3.endpiont`") && shown.contains("s3.endpoint"),
        "{shown}"
    );
}

#[test]
fn drsctl_config_path_names_the_file_without_a_daemon() {
    let top = tempfile::tempdir().unwrap();
    let out = Command::new(bin("drsctl"))
        .args(["config", "--path"])
        .env("DRSD_NO_AUTOSTART", "1")
        .env("DRSD_SOCKET", top.path().join("none.sock"))
        .env_remove("DRSD_CONFIG")
        .env("XDG_CONFIG_HOME", top.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        top.path().join("drsd/config.toml").display().to_string()
    );
}

/// A file the settings name that another user could change (here the S3
/// credentials file, group- and world-writable) is not read: the request
/// that needs it fails naming the file, its mode and the chmod to run,
/// and once fixed the same daemon uses it (a failed client is not kept).
#[test]
fn a_credentials_file_others_may_write_fails_the_request_naming_it_until_fixed() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path();
    fresh_home(dir);
    let var = |name: &str| std::env::var(name).expect("run under tests/with-servers.sh");
    let credentials = dir.join("aws-credentials");
    write_settings(
        &credentials,
        &format!(
            "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            var("AWS_ACCESS_KEY_ID"),
            var("AWS_SECRET_ACCESS_KEY")
        ),
        0o666,
    );
    let config = dir.join("config.toml");
    write_settings(
        &config,
        &format!(
            "prefetch_max_size = 0\n\n[s3]\nendpoint = {:?}\nregion = {:?}\ncredentials_file = {:?}\n",
            var("AWS_ENDPOINT_URL"),
            std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
            credentials,
        ),
        0o600,
    );
    let bucket = format!("config-trust-{}", std::process::id());
    let c = s3();
    rt().block_on(async {
        c.create_bucket(&bucket).await?;
        c.put(&bucket, "cohort/reads.bam", vec![3u8; 4096].into())
            .await
    })
    .unwrap();
    let _daemon = Daemon(spawn_ready(drsd(dir, &config).stderr(Stdio::inherit())));
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let add = || {
        without_aws(&mut Command::new(bin("drsctl")))
            .current_dir(&repo)
            .args([
                "add-url",
                &format!("s3://{bucket}/cohort/reads.bam"),
                "reads.bam",
            ])
            .envs(env(dir, &config))
            .output()
            .unwrap()
    };
    let out = add();
    let shown = text(&out);
    assert!(!out.status.success(), "{shown}");
    assert!(
        shown.contains(&credentials.display().to_string())
            && shown.contains("mode 666")
            && shown.contains(&format!("chmod go-w {}", credentials.display())),
        "{shown}"
    );
    assert!(!shown.contains(&var("AWS_SECRET_ACCESS_KEY")), "{shown}");

    std::fs::set_permissions(&credentials, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = add();
    assert!(out.status.success(), "{}", text(&out));
}
