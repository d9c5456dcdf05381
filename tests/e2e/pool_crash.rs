//! The pool under a real process: `drsd put` killed with SIGKILL mid-write.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use drsd::pool::{Oid, Pool};
use drsd_e2e::bin;
use rand::{Rng, SeedableRng};

const T: u64 = 64 * 1024;
const MIB: usize = 1 << 20;

fn random(seed: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(seed).fill(&mut out[..]);
    out
}

/// The largest stage file now, in bytes (0 when there is none).
fn largest_stage_file(pool: &Path) -> u64 {
    std::fs::read_dir(pool.join("large/stage"))
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

#[test]
fn sigkill_in_the_middle_of_a_large_put_lands_nothing_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let pool_dir = dir.path().join("pool");
    let earlier: Vec<(Oid, Vec<u8>)> = {
        let pool = Pool::open(&pool_dir, Some(T)).unwrap();
        (0..6u64)
            .map(|i| {
                let len = if i % 2 == 0 {
                    1000 * i as usize + 1
                } else {
                    3 * T as usize + i as usize
                };
                let data = random(i, len);
                (pool.put_stream(None, &data[..]).unwrap().oid, data)
            })
            .collect()
    };

    let mut child = Command::new(bin("drsd"))
        .args(["put", "-", "--pool"])
        .arg(&pool_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start drsd put");
    let big = random(99, 16 * MIB);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&big[..4 * MIB]).unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while largest_stage_file(&pool_dir) < 2 * T {
        assert!(
            Instant::now() < deadline,
            "drsd put never staged past the threshold"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the put must still be in flight"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    drop(stdin);

    let pool = Pool::open(&pool_dir, None).unwrap();
    assert!(!pool.has(&Oid::of(&big)).unwrap());
    assert!(!pool.has(&Oid::of(&big[..4 * MIB])).unwrap());
    assert_eq!(largest_stage_file(&pool_dir), 0);
    assert_eq!(
        std::fs::read_dir(pool_dir.join("large/stage"))
            .unwrap()
            .count(),
        0
    );
    let want: HashSet<Vec<u8>> = earlier.iter().map(|(o, _)| o.as_bytes().to_vec()).collect();
    assert_eq!(
        pool.list().unwrap().into_iter().collect::<HashSet<_>>(),
        want
    );
    for (oid, data) in &earlier {
        assert_eq!(&pool.get(oid).unwrap().unwrap().to_vec().unwrap(), data);
    }
    assert!(pool.verify().unwrap().is_empty());
}

#[test]
fn drsd_put_get_and_stats_work_as_commands() {
    let dir = tempfile::tempdir().unwrap();
    let pool_dir = dir.path().join("pool");
    let file = dir.path().join("blob");
    let data = random(5, 300_000);
    std::fs::write(&file, &data).unwrap();
    let drsd = |args: &[&str]| {
        // The pool flags follow the subcommand they belong to.
        let out = Command::new(bin("drsd"))
            .args(args)
            .arg("--pool")
            .arg(&pool_dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "drsd {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let oid = String::from_utf8(drsd(&["put", file.to_str().unwrap()])).unwrap();
    assert_eq!(oid.trim(), Oid::of(&data).to_hex());
    assert_eq!(drsd(&["get", oid.trim()]), data);
    let stats: serde_json::Value = serde_json::from_slice(&drsd(&["stats", "--json"])).unwrap();
    assert_eq!(stats["threshold"], 131072);
    assert_eq!(stats["tiers"][1]["entries"], 1);
    assert_eq!(stats["tiers"][1]["bytes"], 300_000);

    let wrong = Oid::of(b"other").to_hex();
    let out = Command::new(bin("drsd"))
        .args(["put", "--pool", pool_dir.to_str().unwrap()])
        .args(["--sha256", &wrong, file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(&wrong));
}
