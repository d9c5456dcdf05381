use std::os::unix::fs::PermissionsExt;

use super::*;

/// A settings file holding `text` with mode `mode`, in its own folder.
fn file(text: &str, mode: u32) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    (dir, path)
}

fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}

fn load(
    path: &Path,
    vars: &'static [(&'static str, &'static str)],
) -> Result<Settings, SettingsError> {
    Settings::load(FileChoice::Named(path.to_path_buf()), env(vars), &[])
}

const EVERY_KEY: &str = r#"
pool = "/data/pool"
state_dir = "/data/state"
idle_timeout = 600
prefetch_jobs = 4
prefetch_small_jobs = 16
prefetch_bandwidth = "50M"
prefetch_max_size = 1073741824
retry_secs = 2.5
multipart_part_size = "8M"
partial_max = "2G"
upload_part_size = "16M"
copy_whole_max = "1G"
ca_file = "/etc/site-ca.pem"
drs_servers = "dg.TEST=https://drs.example.org"
drs_token_file = "/home/u/.drs-token"
gen3_credentials = "/home/u/gen3.json"
drs_wait_secs = 90
metadata_timeout = 12.5
trust_claims = "s3://lab/lfs"
netrc = "/home/u/.netrc-drs"
team_db = "postgresql://alice@db.lab:5433/drsd"
team_large = "/lab/shared/drsd"
team_required = false
team_node = "alice@login1"
team_lease_secs = 20
team_min_grace_secs = 7200
team_trust_members = false

[s3]
endpoint = "http://127.0.0.1:7480"
region = "eu-west-1"
access_key_id = "AKIDFILE"
secret_access_key = "file-secret-value"
session_token = "file-token-value"
profile = "lab"
credentials_file = "/home/u/.aws/lab"
"#;

#[test]
fn every_key_of_the_file_is_read_with_its_kind() {
    let (_dir, path) = file(EVERY_KEY, 0o600);
    let s = load(&path, &[]).unwrap();
    assert_eq!(s.path(Key::Pool), Some(Path::new("/data/pool")));
    assert_eq!(s.path(Key::StateDir), Some(Path::new("/data/state")));
    assert_eq!(s.secs(Key::IdleTimeout), Some(Duration::from_secs(600)));
    assert_eq!(s.number(Key::PrefetchJobs), Some(4));
    assert_eq!(s.number(Key::PrefetchSmallJobs), Some(16));
    assert_eq!(s.number(Key::PrefetchBandwidth), Some(50 << 20));
    assert_eq!(s.number(Key::PrefetchMaxSize), Some(1 << 30));
    assert_eq!(s.secs(Key::RetrySecs), Some(Duration::from_millis(2500)));
    assert_eq!(s.number(Key::MultipartPartSize), Some(8 << 20));
    assert_eq!(s.number(Key::PartialMax), Some(2 << 30));
    assert_eq!(s.number(Key::UploadPartSize), Some(16 << 20));
    assert_eq!(s.number(Key::CopyWholeMax), Some(1 << 30));
    assert_eq!(s.path(Key::CaFile), Some(Path::new("/etc/site-ca.pem")));
    assert_eq!(
        s.text(Key::DrsServers),
        Some("dg.TEST=https://drs.example.org")
    );
    assert_eq!(
        s.path(Key::DrsTokenFile),
        Some(Path::new("/home/u/.drs-token"))
    );
    assert_eq!(
        s.path(Key::Gen3Credentials),
        Some(Path::new("/home/u/gen3.json"))
    );
    assert_eq!(s.secs(Key::DrsWaitSecs), Some(Duration::from_secs(90)));
    assert_eq!(
        s.secs(Key::MetadataTimeout),
        Some(Duration::from_millis(12_500))
    );
    assert_eq!(s.text(Key::TrustClaims), Some("s3://lab/lfs"));
    assert_eq!(s.path(Key::Netrc), Some(Path::new("/home/u/.netrc-drs")));
    assert_eq!(s.text(Key::S3Endpoint), Some("http://127.0.0.1:7480"));
    assert_eq!(s.text(Key::S3Region), Some("eu-west-1"));
    assert_eq!(s.text(Key::S3AccessKeyId), Some("AKIDFILE"));
    assert_eq!(s.text(Key::S3SecretAccessKey), Some("file-secret-value"));
    assert_eq!(s.text(Key::S3SessionToken), Some("file-token-value"));
    assert_eq!(s.text(Key::S3Profile), Some("lab"));
    assert_eq!(
        s.secs(Key::TeamMinGraceSecs),
        Some(Duration::from_secs(7200))
    );
    assert_eq!(s.flag(Key::TeamTrustMembers), Some(false));
    assert_eq!(
        s.path(Key::S3CredentialsFile),
        Some(Path::new("/home/u/.aws/lab"))
    );
    // Every key of the table is in the example above, so none was forgotten.
    for spec in SPECS {
        assert_eq!(
            s.source(spec.key),
            Some(&Source::File(path.clone())),
            "{}",
            spec.dotted()
        );
    }
}

#[test]
fn the_environment_overrides_the_file_per_setting() {
    let (_dir, path) = file(
        "prefetch_jobs = 4\nupload_part_size = \"16M\"\n[s3]\nendpoint = \"http://file:7480\"\nregion = \"eu-west-1\"\n",
        0o600,
    );
    let s = load(
        &path,
        &[
            ("DRSD_PREFETCH_JOBS", "7"),
            ("AWS_ENDPOINT_URL", "http://env:7480"),
            ("AWS_REGION", ""),
        ],
    )
    .unwrap();
    assert_eq!(s.number(Key::PrefetchJobs), Some(7));
    assert_eq!(
        s.source(Key::PrefetchJobs),
        Some(&Source::Environment("DRSD_PREFETCH_JOBS"))
    );
    assert_eq!(s.text(Key::S3Endpoint), Some("http://env:7480"));
    assert_eq!(
        s.source(Key::S3Endpoint),
        Some(&Source::Environment("AWS_ENDPOINT_URL"))
    );
    // Not overridden: the file's, and an empty variable counts as unset.
    assert_eq!(s.number(Key::UploadPartSize), Some(16 << 20));
    assert_eq!(s.text(Key::S3Region), Some("eu-west-1"));
    assert_eq!(s.source(Key::S3Region), Some(&Source::File(path.clone())));
    // The first of a setting's variables wins.
    let s = load(
        &path,
        &[
            ("AWS_ENDPOINT_URL", "http://b:1"),
            ("AWS_ENDPOINT_URL_S3", "http://a:1"),
        ],
    )
    .unwrap();
    assert_eq!(s.text(Key::S3Endpoint), Some("http://a:1"));
}

#[test]
fn a_flag_overrides_the_environment_and_the_file() {
    let (_dir, path) = file("pool = \"/file/pool\"\n", 0o600);
    let flags = [(Key::Pool, Value::Path("/flag/pool".into()))];
    let s = Settings::load(
        FileChoice::Named(path),
        env(&[("DRSD_POOL", "/env/pool")]),
        &flags,
    )
    .unwrap();
    assert_eq!(s.path(Key::Pool), Some(Path::new("/flag/pool")));
    assert_eq!(s.source(Key::Pool), Some(&Source::Flag("--pool")));
}

#[test]
fn an_unknown_key_is_refused_naming_the_file_and_the_key() {
    for (text, key) in [
        ("prefetch_jobz = 4\n", "prefetch_jobz"),
        ("[s3]\nendpont = \"http://x\"\n", "s3.endpont"),
        ("[s4]\nendpoint = \"http://x\"\n", "s4"),
        // An S3 key at the top level, outside its table.
        ("endpoint = \"http://x\"\n", "endpoint"),
    ] {
        let (_dir, path) = file(text, 0o600);
        let err = load(&path, &[]).unwrap_err().to_string();
        assert!(
            err.contains(&path.display().to_string())
                && err.contains(&format!("`{key}`"))
                && err.contains("s3.endpoint"),
            "{err}"
        );
    }
}

#[test]
fn a_bad_value_is_refused_naming_the_key_and_what_is_accepted() {
    for (text, key, accepted) in [
        (
            "prefetch_jobs = \"many\"\n",
            "prefetch_jobs",
            "whole number",
        ),
        ("prefetch_jobs = -1\n", "prefetch_jobs", "whole number"),
        (
            "upload_part_size = \"64Q\"\n",
            "upload_part_size",
            "K, M, G",
        ),
        ("retry_secs = \"soon\"\n", "retry_secs", "seconds"),
        ("pool = 3\n", "pool", "a path"),
        ("[s3]\nendpoint = \"ftp://x\"\n", "s3.endpoint", "http://"),
        ("drs_servers = \"dg.TEST\"\n", "drs_servers", "NAME=URL"),
        ("s3 = \"x\"\n", "s3", "table"),
    ] {
        let (_dir, path) = file(text, 0o600);
        let err = load(&path, &[]).unwrap_err().to_string();
        assert!(
            err.contains(&path.display().to_string())
                && err.contains(&format!("`{key}`"))
                && err.contains(accepted),
            "{text}: {err}"
        );
    }
}

#[test]
fn a_bad_variable_is_refused_naming_it() {
    let err = Settings::from_pairs(&[("DRSD_PREFETCH_BANDWIDTH", "fast")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("DRSD_PREFETCH_BANDWIDTH")
            && err.contains("\"fast\"")
            && err.contains("K, M, G"),
        "{err}"
    );
}

#[test]
fn a_file_that_is_not_toml_is_refused_without_quoting_its_lines() {
    let (_dir, path) = file(
        "[s3]\nsecret_access_key = \"unterminated-secret-value\n",
        0o600,
    );
    let err = load(&path, &[]).unwrap_err().to_string();
    assert!(
        err.contains("not valid TOML") && err.contains("line 2"),
        "{err}"
    );
    assert!(!err.contains("unterminated-secret-value"), "{err}");
}

#[test]
fn a_group_readable_file_holding_a_secret_is_refused_with_the_chmod_to_run() {
    let text = "[s3]\naccess_key_id = \"AKID\"\nsecret_access_key = \"file-secret-value\"\n";
    let (_dir, path) = file(text, 0o640);
    let err = load(&path, &[]).unwrap_err().to_string();
    assert!(
        err.contains(&format!("chmod 600 {}", path.display()))
            && err.contains("s3.secret_access_key"),
        "{err}"
    );
    assert!(!err.contains("file-secret-value"), "{err}");
    // Without a secret, a readable file is fine; a writable one never is.
    let (_dir, path) = file("prefetch_jobs = 3\n", 0o644);
    assert_eq!(load(&path, &[]).unwrap().number(Key::PrefetchJobs), Some(3));
    let (_dir, path) = file("prefetch_jobs = 3\n", 0o664);
    let err = load(&path, &[]).unwrap_err().to_string();
    assert!(
        err.contains("may write it")
            && err.contains("mode 664")
            && err.contains(&format!("chmod go-w {}", path.display())),
        "{err}"
    );
}

#[test]
fn a_missing_default_file_is_fine_and_a_missing_named_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let s = Settings::load(FileChoice::Default(path.clone()), env(&[]), &[]).unwrap();
    assert_eq!(s.file(), Some(path.as_path()));
    assert!(!s.report().file_read);
    assert!(s
        .report()
        .settings
        .iter()
        .all(|l| l.source == SettingSource::Default));
    let err = load(&path, &[]).unwrap_err().to_string();
    assert!(
        err.contains(&path.display().to_string()) && err.contains("no such file"),
        "{err}"
    );
}

#[test]
fn a_symlink_to_the_users_own_file_is_followed() {
    let (dir, target) = file("prefetch_jobs = 5\n", 0o600);
    let link = dir.path().join("link.toml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert_eq!(load(&link, &[]).unwrap().number(Key::PrefetchJobs), Some(5));
}

/// Another user's file, named directly or through the user's own symlink,
/// and the user's own file through another user's symlink. Making a file
/// another user's takes root: not root, this is skipped (the rule itself is
/// `trusted_file`'s, tested there).
#[test]
fn another_users_file_is_refused_even_through_a_symlink() {
    if drsd_proto::paths::current_uid() != 0 {
        eprintln!("not root: another user's file cannot be made here, skipped");
        return;
    }
    let nobody = 65534;
    let (dir, theirs) = file("prefetch_jobs = 5\n", 0o644);
    std::os::unix::fs::lchown(&theirs, Some(nobody), None).unwrap();
    let link = dir.path().join("link.toml");
    std::os::unix::fs::symlink(&theirs, &link).unwrap();
    for path in [theirs.as_path(), link.as_path()] {
        let err = load(path, &[]).unwrap_err().to_string();
        assert!(
            err.contains(&format!("owned by uid {nobody}")) && err.contains("chown"),
            "{err}"
        );
    }
    let (dir, mine) = file("prefetch_jobs = 5\n", 0o600);
    let link = dir.path().join("their-link.toml");
    std::os::unix::fs::symlink(&mine, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(nobody), None).unwrap();
    let err = load(&link, &[]).unwrap_err().to_string();
    assert!(err.contains("symbolic link"), "{err}");
    // Root's own file is trusted as the user's is.
    assert_eq!(load(&mine, &[]).unwrap().number(Key::PrefetchJobs), Some(5));
}

#[test]
fn the_report_shows_sources_and_never_a_secret() {
    let (_dir, path) = file(
        "[s3]\naccess_key_id = \"AKIDFILE\"\nsecret_access_key = \"file-secret-value\"\n",
        0o600,
    );
    let s = load(&path, &[("AWS_SESSION_TOKEN", "env-token-value")]).unwrap();
    let report = s.report();
    let line = |key: &str| {
        report
            .settings
            .iter()
            .find(|l| l.key == key)
            .unwrap()
            .clone()
    };
    assert_eq!(line("s3.access_key_id").value, "AKIDFILE");
    assert_eq!(
        line("s3.access_key_id").source,
        SettingSource::File { path: path.clone() }
    );
    assert_eq!(line("s3.secret_access_key").value, SECRET_SHOWN);
    assert_eq!(line("s3.session_token").value, SECRET_SHOWN);
    assert_eq!(
        line("s3.session_token").source,
        SettingSource::Environment {
            var: "AWS_SESSION_TOKEN".into()
        }
    );
    assert_eq!(line("prefetch_jobs").source, SettingSource::Default);
    assert_eq!(line("prefetch_jobs").value, "2");
    let shown = format!("{} {s:?}", serde_json::to_string(&report).unwrap());
    assert!(
        !shown.contains("file-secret-value") && !shown.contains("env-token-value"),
        "{shown}"
    );
}

#[test]
fn sizes_take_binary_suffixes() {
    assert_eq!(parse_size("123"), Some(123));
    assert_eq!(parse_size("64k"), Some(64 << 10));
    assert_eq!(parse_size(" 50M "), Some(50 << 20));
    assert_eq!(parse_size("2G"), Some(2 << 30));
    assert_eq!(parse_size("fast"), None);
    assert_eq!(parse_size(""), None);
}

#[test]
fn the_s3_clients_settings_come_from_the_file() {
    let (_dir, path) = file(
        "[s3]\nendpoint = \"http://127.0.0.1:7480\"\nregion = \"lab\"\naccess_key_id = \"AKIDFILE\"\nsecret_access_key = \"s\"\n",
        0o600,
    );
    let s = load(&path, &[]).unwrap();
    let config = crate::stores::S3Config::from_settings(&s).unwrap();
    assert_eq!(
        (
            config.endpoint.as_str(),
            config.region.as_str(),
            config.path_style
        ),
        ("http://127.0.0.1:7480/", "lab", true)
    );
    let creds = crate::stores::S3Credentials::resolve(&s, None).unwrap();
    assert_eq!(
        creds.source,
        crate::stores::CredentialSource::SettingsFile { path }
    );
}

#[test]
fn the_team_s_settings_are_read_and_the_database_password_is_never_shown() {
    let s = Settings::from_pairs(&[
        (
            "DRSD_TEAM_DB",
            "postgresql://alice:hunter2-secret@db.lab:5433/drsd?sslmode=require",
        ),
        ("DRSD_TEAM_LARGE", "pg-lo"),
        ("DRSD_TEAM_REQUIRED", "no"),
        ("DRSD_TEAM_LEASE_SECS", "2"),
    ])
    .unwrap();
    assert_eq!(s.flag(Key::TeamRequired), Some(false));
    assert_eq!(s.text(Key::TeamLarge), Some("pg-lo"));
    assert_eq!(s.secs(Key::TeamLeaseSecs), Some(Duration::from_secs(2)));
    assert!(
        s.text(Key::TeamDb).unwrap().contains("hunter2"),
        "the URL is kept whole"
    );
    let report = s.report();
    let line = report.settings.iter().find(|l| l.key == "team_db").unwrap();
    assert!(!line.value.contains("hunter2"), "{}", line.value);
    assert!(
        line.value.contains("alice@db.lab:5433/drsd"),
        "{}",
        line.value
    );
    assert!(!format!("{s:?}").contains("hunter2"));

    // A value that is not a URL is refused without being quoted.
    let err = Settings::from_pairs(&[("DRSD_TEAM_DB", "host=db password=hunter2 port=x")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("DRSD_TEAM_DB") && !err.contains("hunter2"),
        "{err}"
    );
    let err = Settings::from_pairs(&[("DRSD_TEAM_REQUIRED", "maybe")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("true or false"), "{err}");
}

#[test]
fn a_team_database_url_with_a_password_must_be_in_a_private_file() {
    let text = "team_db = \"postgresql://alice:hunter2@db.lab/drsd\"\n";
    let (_dir, path) = file(text, 0o644);
    let err = load(&path, &[]).unwrap_err().to_string();
    assert!(err.contains("team_db") && !err.contains("hunter2"), "{err}");
    let (_dir, path) = file(text, 0o600);
    assert!(load(&path, &[]).is_ok());
    // Without a password, a shared file is fine.
    let (_dir, path) = file("team_db = \"postgresql://alice@db.lab/drsd\"\n", 0o644);
    assert!(load(&path, &[]).is_ok());
}
