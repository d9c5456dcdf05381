//! `drs-test-server`: the tests' DRS + Indexd server (`drsd_e2e::drs_server`)
//! as a process, for tools outside the test binary, chiefly the GA4GH DRS
//! compliance suite (`tests/ci/drs-compliance.sh`). It serves a fixed set of
//! objects, prints its base URL on the first line of standard output once it
//! accepts connections, and runs until killed.
//!
//! The objects (their ids are what the compliance config names):
//! - `blob-served`: bytes served here at an `access_url`;
//! - `blob-signed`: bytes behind an `access_id` (`signed-https`) that
//!   resolves to a signed, expiring URL;
//! - `blob-s3`: metadata only, an `s3://` access URL;
//! - `bundle-1`: a bundle of the two served blobs;
//! - `dg.TEST/<RECORD_UUID>`: an Indexd record, served as a DRS object.
//!
//! Fence's routes (`/user/...`) and the upload bucket are served too, as in
//! the tests (`drsd_e2e::drs_server`); `--api-key` and `--arborist` set up
//! the credentials they want.

use std::io::Write;
use std::time::Duration;

use clap::Parser;
use drsd_e2e::drs_server::{AccessSpec, Auth, Content, DrsServer, NewRecord, ObjectSpec};
use md5::Md5;
use sha2::{Digest, Sha256};

/// The UUID of the fixed Indexd record's did.
const RECORD_UUID: &str = "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9";

#[derive(Parser)]
#[command(
    about = "The drsd tests' DRS 1.2 (+ bulk) and Gen3 Indexd server, with a fixed set of objects"
)]
struct Args {
    /// Port on 127.0.0.1 (0: any free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// `maxBulkRequestLength`; 0 turns bulk requests off (a DRS 1.2 server).
    #[arg(long, default_value_t = 0)]
    bulk_limit: usize,
    /// Require HTTP Basic `USER:PASSWORD` on the DRS endpoints.
    #[arg(long, conflicts_with = "bearer")]
    basic: Option<String>,
    /// Require `Authorization: Bearer TOKEN` on the DRS endpoints.
    #[arg(long)]
    bearer: Option<String>,
    /// Let Fence's token endpoint take this Gen3 API key, `KEY_ID:API_KEY`.
    #[arg(long)]
    api_key: Option<String>,
    /// A commons' Indexd: its writes take the tokens Fence issues (Arborist
    /// configured).
    #[arg(long)]
    arborist: bool,
}

/// Deterministic bytes of a fixture, different per `seed`.
fn fixture(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(seed) ^ seed)
        .collect()
}

fn populate(server: &DrsServer) -> Result<(), String> {
    let mut served = ObjectSpec::blob("blob-served", fixture(7, 64 << 10));
    served.name = Some("served.bin".into());
    server.add_object(served);

    let mut signed = ObjectSpec::blob("blob-signed", fixture(11, 4096));
    signed.name = Some("signed.bin".into());
    signed.access = vec![AccessSpec::signed("signed-https", Duration::from_secs(300))];
    server.add_object(signed);

    let elsewhere = fixture(13, 1 << 20);
    server.add_object(ObjectSpec {
        id: "blob-s3".into(),
        name: Some("reads.bam".into()),
        content: Content::Size(elsewhere.len() as u64),
        checksums: vec![("sha-256".into(), hex::encode(Sha256::digest(&elsewhere)))],
        access: vec![AccessSpec::s3("drs-test", "reads.bam")],
    });

    server.add_bundle(
        "bundle-1",
        Some("bundle-1"),
        &[("served.bin", "blob-served"), ("signed.bin", "blob-signed")],
    );

    let indexed = fixture(17, 2048);
    let record = NewRecord {
        form: "object".into(),
        size: indexed.len() as u64,
        hashes: [
            ("md5".to_string(), hex::encode(Md5::digest(&indexed))),
            ("sha256".to_string(), hex::encode(Sha256::digest(&indexed))),
        ]
        .into(),
        urls: vec!["s3://drs-test/indexed.cram".into()],
        file_name: Some("indexed.cram".into()),
        authz: vec!["/programs/test".into()],
        acl: Vec::new(),
        did: Some(format!("dg.TEST/{RECORD_UUID}")),
    };
    server.add_record(record).map(|_| ())
}

fn auth(args: &Args, server: &DrsServer) -> Result<Auth, String> {
    if let Some(login) = &args.basic {
        let (user, password) = login.split_once(':').ok_or("--basic takes USER:PASSWORD")?;
        return Ok(Auth::Basic {
            user: user.into(),
            password: password.into(),
        });
    }
    if let Some(key) = &args.api_key {
        let (key_id, api_key) = key
            .split_once(':')
            .ok_or("--api-key takes KEY_ID:API_KEY")?;
        server.set_api_key(key_id, api_key);
    }
    server.set_arborist(args.arborist);
    if let Some(token) = &args.bearer {
        server.add_token(token);
        return Ok(Auth::Bearer);
    }
    Ok(Auth::None)
}

fn main() {
    let args = Args::parse();
    let server = DrsServer::start_on(args.port).unwrap_or_else(|e| {
        eprintln!(
            "drs-test-server: cannot listen on 127.0.0.1:{}: {e}",
            args.port
        );
        std::process::exit(1);
    });
    let set_up = populate(&server).and_then(|()| auth(&args, &server));
    match set_up {
        Ok(auth) => server.set_auth(auth),
        Err(e) => {
            eprintln!("drs-test-server: {e}");
            std::process::exit(2);
        }
    }
    server.set_bulk_limit((args.bulk_limit > 0).then_some(args.bulk_limit));
    // Bulk access URLs are DRS 1.4 too: a 1.2 server has none.
    server.set_bulk_access(args.bulk_limit > 0);
    println!("{}", server.base_url());
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
