//! Secrets at rest and in logs: a URL's user-info and signature reach no
//! log line, no error message and no `drsctl status`, and every file and
//! folder of the daemon's state is the user's alone. Against nginx (which
//! ignores query strings and basic auth for static files) and an
//! autostarted daemon, which logs to `drsd.log` beside its socket.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use drsd_e2e::{bin, fresh_home};

use super::add_url::{git, serve, text, www_dir};
use super::failures::{wrong_md5, Get, Tiny, BODY};

const PASSWORD: &str = "hunter2pw";
const SIGNATURE: &str = "f00dfeedcafe0123456789abcdef0123456789abcdef0123456789abcdefbead";
const CREDENTIAL: &str = "AKIDSECRETCRED";

/// A HOME whose daemon drsctl starts on demand.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn drsctl(&self, cwd: &Path, args: &[&str]) -> Output {
        Command::new(bin("drsctl"))
            .current_dir(cwd)
            .args(args)
            .env("DRSD_SOCKET", self.path("run/drsd.sock"))
            .env("DRSD_POOL", self.path("pool"))
            .env("DRSD_STATE_DIR", self.path("state"))
            .env("DRSD_BIN", bin("drsd"))
            .env("DRSD_RETRY_SECS", "1")
            .env_remove("DRSD_NO_AUTOSTART")
            .env_remove("JOURNAL_STREAM")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = self.drsctl(self.dir.path(), &["shutdown"]);
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// `PLAIN` with user-info and a signed query: `http://user:PASSWORD@host/path?...`.
fn signed(plain: &str) -> String {
    let (scheme, rest) = plain.split_once("://").unwrap();
    format!(
        "{scheme}://steward:{PASSWORD}@{rest}?X-Amz-Algorithm=AWS4-HMAC-SHA256\
         &X-Amz-Credential={CREDENTIAL}%2F20260101%2Fus-east-1%2Fs3%2Faws4_request\
         &X-Amz-Signature={SIGNATURE}&X-Amz-Security-Token=tok{PASSWORD}"
    )
}

/// nginx's plain-HTTP URL of `rel` (written by [`serve`] under its www).
fn serve_http(rel: &str) -> String {
    let https = std::env::var("DRSD_TEST_HTTPS_URL").unwrap();
    let http = std::env::var("DRSD_TEST_HTTP_URL").unwrap();
    format!("{http}/{rel}").replace(&https, &http)
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in [PASSWORD, SIGNATURE, CREDENTIAL] {
        assert!(!text.contains(secret), "{what} shows {secret}: {text}");
    }
}

#[test]
fn signed_urls_reach_no_log_status_or_error_and_the_state_is_private() {
    // 022 is what most users have.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
    let home = Home {
        dir: tempfile::tempdir().unwrap(),
    };
    fresh_home(home.dir.path());
    // Folders an older drsd (or the user) left open to others: closed at start.
    for dir in ["state", "pool"] {
        std::fs::create_dir_all(home.path(dir)).unwrap();
        std::fs::set_permissions(home.path(dir), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let repo = home.path("r");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let dir = www_dir("secrets");
    serve(&format!("{dir}/reads.bam"), b"the reads themselves\n");
    // Its HEAD answers, its GET is a 404: the prefetch fails for good.
    let tiny = Tiny::start(wrong_md5(), BODY.len(), Get::NotFound);
    let (good, gone, missing) = (
        signed(&serve_http(&format!("{dir}/reads.bam"))),
        signed(&tiny.url("gone.bam")),
        signed(&serve_http(&format!("{dir}/missing.bam"))),
    );

    // One that works, one whose prefetch fails, one that is not there.
    let out = home.drsctl(&repo, &["--json", "add-url", &good]);
    assert!(out.status.success(), "{}", text(&out));
    assert_no_secret("add-url's report", &text(&out));
    let out = home.drsctl(&repo, &["add-url", &gone]);
    assert!(out.status.success(), "{}", text(&out));
    assert_no_secret("add-url's report", &text(&out));
    let out = home.drsctl(&repo, &["add-url", &missing]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("missing.bam"), "{}", text(&out));
    assert_no_secret("add-url's error", &text(&out));

    // The good one, small, was read by add-url itself; the gone one fails
    // (404), at add-url's read, for good.
    let out = home.drsctl(&repo, &["promote", "--all", "--wait"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("gone.bam"), "{}", text(&out));
    assert_no_secret("promote's error", &text(&out));
    let start = Instant::now();
    let status = loop {
        let out = home.drsctl(&repo, &["--json", "status"]);
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if status["queue"]["failed"] == 1 {
            break text(&out);
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{status}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        status.contains("gone.bam") && status.contains("REDACTED"),
        "{status}"
    );
    assert_no_secret("drsctl status --json", &status);
    let human = text(&home.drsctl(&repo, &["status"]));
    assert!(human.contains("gone.bam"), "{human}");
    assert_no_secret("drsctl status", &human);

    home.drsctl(&repo, &["shutdown"]);
    let log = std::fs::read_to_string(home.path("run/drsd.log")).unwrap();
    assert!(
        log.contains("reads.bam") && log.contains("gone.bam"),
        "{log}"
    );
    assert_no_secret("drsd.log", &log);

    // Kept whole only where a later request needs it: the registry and the
    // repo's mirror, both private.
    let mirror = repo.join(".git/lfs/foreign/registry.jsonl");
    assert!(std::fs::read_to_string(&mirror)
        .unwrap()
        .contains(SIGNATURE));
    assert_eq!(mode(&mirror), 0o600);
    assert_eq!(mode(mirror.parent().unwrap()), 0o700);
    for folder in ["state", "pool", "pool/partial", "run"] {
        assert_eq!(mode(&home.path(folder)), 0o700, "{folder}");
    }
    for file in [
        "state/registry.sqlite",
        "state/repos.json",
        "pool/kv.sqlite",
        "run/drsd.log",
    ] {
        assert_eq!(mode(&home.path(file)), 0o600, "{file}");
    }
    for side in ["state/registry.sqlite-wal", "state/registry.sqlite-shm"] {
        if home.path(side).exists() {
            assert_eq!(mode(&home.path(side)), 0o600, "{side}");
        }
    }
}
