//! Property tests of the wire framing and messages (`cargo nextest run
//! --workspace props`): any bytes, cut anywhere, frame into exactly the lines a
//! simple model says, an over-long line is dropped as it streams in rather
//! than held whole, and every request and reply crosses the codec unchanged.

use std::path::PathBuf;

use bytes::BytesMut;
use proptest::prelude::*;
use tokio_util::codec::{Decoder, Encoder};

use crate::codec::{JsonLines, Line};
use crate::*;

/// `cases` unless `PROPTEST_CASES` asks for more (or fewer), as in the
/// daemon's property tests (docs/fuzzing.md).
fn config(cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..Default::default()
    }
}

/// Bytes rich in what framing cares about: newlines, carriage returns,
/// broken and whole UTF-8.
fn wire_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        4 => any::<u8>().prop_map(|b| vec![b]),
        3 => Just(b"\n".to_vec()),
        2 => Just(b"\r\n".to_vec()),
        1 => Just(b"\r".to_vec()),
        2 => "[a-z{}\":, ]{1,12}".prop_map(String::into_bytes),
        1 => Just("é€😀".as_bytes().to_vec()),
        1 => Just(vec![0xe2, 0x82]),
        1 => Just(vec![0xff, 0xfe]),
    ];
    proptest::collection::vec(piece, 0..60).prop_map(|p| p.concat())
}

/// What the framing must yield for `input`, line by line: a line (without
/// its newline) longer than `max` is `TooLong`, else its text without one
/// trailing `\r`, or `NotText`. A last line without a newline counts, unless
/// it is empty or a lone `\r`.
fn model(input: &[u8], max: usize) -> Vec<Line> {
    let mut parts: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
    let last = parts.pop().unwrap_or_default();
    let line = |raw: &[u8]| {
        if raw.len() > max {
            return Line::TooLong;
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        match std::str::from_utf8(raw) {
            Ok(text) => Line::Text(text.to_string()),
            Err(_) => Line::NotText,
        }
    };
    let mut lines: Vec<Line> = parts.into_iter().map(line).collect();
    // At the end: over the limit is still too long; else nothing when empty
    // or a lone `\r`.
    if last.len() > max || (!last.is_empty() && last != b"\r") {
        lines.push(line(last));
    }
    lines
}

/// Feeds `input` in `chunks` as a socket would, decoding after each; checks
/// that the decoder never holds more than `max` bytes of an unfinished line.
fn decode_all(input: &[u8], chunks: &[usize], max: usize) -> Vec<Line> {
    let mut codec = JsonLines::new(max);
    let (mut buf, mut got, mut rest) = (BytesMut::new(), Vec::new(), input);
    let mut sizes = chunks.iter().cycle();
    while !rest.is_empty() {
        let n = (*sizes.next().unwrap()).min(rest.len());
        buf.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        while let Some(line) = codec.decode(&mut buf).expect("framing never fails") {
            got.push(line);
        }
        assert!(
            buf.len() <= max,
            "{} bytes held with a {max}-byte limit",
            buf.len()
        );
    }
    while let Some(line) = codec.decode_eof(&mut buf).expect("framing never fails") {
        got.push(line);
    }
    got
}

fn text() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        3 => "[ -~]{0,16}",
        1 => any::<String>(),
        1 => Just("line\nbreak\r\n\"quoted\" \\ \u{2028}\u{0}".to_string()),
    ]
}

fn path() -> impl Strategy<Value = PathBuf> + Clone {
    text().prop_map(PathBuf::from)
}

fn opt<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T> + Clone,
) -> impl Strategy<Value = Option<T>> + Clone {
    proptest::option::of(s)
}

fn oid() -> impl Strategy<Value = Oid> + Clone {
    any::<[u8; 32]>().prop_map(Oid::from_digest)
}

fn job_state() -> impl Strategy<Value = JobState> + Clone {
    prop_oneof![
        Just(JobState::Queued),
        Just(JobState::Running),
        Just(JobState::Retrying),
        Just(JobState::Failed),
        Just(JobState::Held),
        Just(JobState::Skipped),
        Just(JobState::Done),
        Just(JobState::Hashed),
    ]
}

fn stage() -> impl Strategy<Value = Stage> {
    prop_oneof![
        Just(Stage::Head),
        Just(Stage::Download),
        Just(Stage::Upload),
        Just(Stage::Verify),
        Just(Stage::Hydrate),
        Just(Stage::Gc),
        Just(Stage::Prune),
    ]
}

fn oid_source() -> impl Strategy<Value = OidSource> {
    prop_oneof![
        Just(OidSource::Sha256Option),
        Just(OidSource::StoreChecksum),
        Just(OidSource::DrsChecksum),
        Just(OidSource::Registry),
        Just(OidSource::Hashed),
        Just(OidSource::Etag),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    let entry = (
        text(),
        opt(path()),
        opt(text()),
        opt(any::<usize>()),
        opt(any::<u64>()),
        opt(text()),
    )
        .prop_map(|(url, path, sha256, line, size, md5)| AddUrlEntry {
            url,
            path,
            sha256,
            line,
            size,
            md5,
        });
    prop_oneof![
        (any::<u32>(), text())
            .prop_map(|(version, client)| Request::Hello(HelloRequest { version, client })),
        Just(Request::Status),
        path().prop_map(|path| Request::ReposAdd(RepoPath { path })),
        path().prop_map(|path| Request::ReposRemove(RepoPath { path })),
        Just(Request::ReposList),
        Just(Request::PoolVerify),
        (any::<[bool; 2]>(), opt(any::<u64>())).prop_map(|(b, grace_secs)| Request::Gc(
            GcRequest {
                dry_run: b[0],
                force: b[1],
                grace_secs,
            }
        )),
        Just(Request::Shutdown),
        (
            path(),
            path(),
            [opt(text()), opt(text()), opt(text())],
            [any::<bool>(), any::<bool>()]
        )
            .prop_map(
                |(path, agent, [remote, indexd, authz], [undo, no_remote])| {
                    Request::RepoInit(RepoInitRequest {
                        path,
                        agent,
                        remote,
                        indexd,
                        authz,
                        undo,
                        no_remote,
                    })
                }
            ),
        (path(), oid(), any::<u64>()).prop_map(|(repo, oid, size)| Request::LfsDownload(
            LfsDownloadRequest { repo, oid, size }
        )),
        (
            path(),
            proptest::collection::vec(entry, 0..4),
            opt(path()),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(cwd, entries, from, force, no_fetch)| Request::AddUrl(
                AddUrlRequest {
                    cwd,
                    entries,
                    from,
                    force,
                    no_fetch,
                }
            )),
        (path(), oid(), any::<u64>(), path()).prop_map(|(repo, oid, size, path)| {
            Request::LfsUpload(LfsUploadRequest {
                repo,
                oid,
                size,
                path,
            })
        }),
        (path(), text(), text()).prop_map(|(repo, remote, updates)| Request::PrePush(
            PrePushRequest {
                repo,
                remote,
                updates
            }
        )),
        (
            path(),
            proptest::collection::vec(path(), 0..4),
            any::<bool>()
        )
            .prop_map(|(cwd, paths, all)| Request::Promote(PromoteRequest {
                cwd,
                paths,
                all,
                retry: all,
            })),
        path().prop_map(|cwd| Request::Provisional(ProvisionalRequest { cwd })),
        path().prop_map(|repo| Request::Hydrate(HydrateRequest { repo })),
        path().prop_map(|repo| Request::CheckOut(CheckOutRequest { repo })),
        (
            path(),
            proptest::collection::vec(path(), 0..4),
            any::<bool>()
        )
            .prop_map(|(cwd, paths, all)| Request::Fetch(FetchRequest { cwd, paths, all })),
        text().prop_map(|node| Request::TeamForget(TeamForgetRequest { node })),
        Just(Request::TeamJoin(TeamJoinRequest {})),
        Just(Request::TeamLeave(TeamLeaveRequest {})),
        (
            path(),
            proptest::collection::vec(path(), 0..3),
            any::<bool>(),
            opt(any::<u32>())
        )
            .prop_map(
                |(cwd, repos, dry_run, copies)| Request::Prune(PruneRequest {
                    cwd,
                    repos,
                    dry_run,
                    copies,
                })
            ),
    ]
}

fn tier() -> impl Strategy<Value = Tier> + Clone {
    prop_oneof![Just(Tier::Kv), Just(Tier::Large)]
}

fn problems() -> impl Strategy<Value = Vec<ObjectProblem>> + Clone {
    proptest::collection::vec(
        (oid(), text()).prop_map(|(oid, why)| ObjectProblem { oid, why }),
        0..3,
    )
}

fn repo_report() -> impl Strategy<Value = RepoReport> + Clone {
    let state = prop_oneof![
        Just(RepoState::Pending),
        Just(RepoState::Watching),
        Just(RepoState::Polling),
        Just(RepoState::Missing),
        Just(RepoState::Error),
    ];
    let scan = (opt(text()), any::<[u64; 5]>()).prop_map(|(head, n)| ScanReport {
        head,
        pointers: n[0],
        in_repo: n[1],
        in_pool: n[2],
        absent: n[3],
        scanned_at: n[4],
    });
    (path(), state, opt(text()), opt(scan)).prop_map(|(path, state, problem, scan)| RepoReport {
        path,
        state,
        problem,
        scan,
    })
}

fn status() -> impl Strategy<Value = StatusReport> {
    let job = (
        text(),
        any::<u64>(),
        job_state(),
        any::<u32>(),
        opt(text()),
        opt(any::<u64>()),
    )
        .prop_map(|(url, size, state, attempts, error, retry_at)| JobLine {
            url,
            size,
            state,
            attempts,
            error,
            retry_at,
        });
    let active = (text(), any::<[u64; 3]>()).prop_map(|(url, n)| JobProgress {
        url,
        done: n[0],
        total: n[1],
        bytes_per_sec: n[2],
    });
    let queue = (
        any::<[u64; 6]>(),
        proptest::collection::vec(active, 0..2),
        proptest::collection::vec(job, 0..2),
    )
        .prop_map(|(n, active, open)| QueueReport {
            queued: n[0],
            running: n[1],
            failed: n[2],
            held: n[3],
            done: n[4],
            retrying: n[5],
            active,
            open,
        });
    let line =
        (tier(), text(), any::<u64>(), any::<u64>()).prop_map(|(tier, engine, e, b)| TierLine {
            tier,
            engine,
            entries: e,
            bytes: b,
        });
    let pool = (
        any::<u64>(),
        proptest::collection::vec(line, 0..3),
        any::<u64>(),
    )
        .prop_map(|(threshold, tiers, age_secs)| PoolStatsReport {
            threshold,
            tiers,
            age_secs,
        });
    (
        (text(), any::<u32>(), any::<u64>(), opt(any::<u64>())),
        (path(), path(), pool),
        proptest::collection::vec(repo_report(), 0..3),
        queue,
    )
        .prop_map(
            |(
                (version, pid, uptime_secs, idle_timeout_secs),
                (socket, pool_dir, pool),
                repos,
                queue,
            )| {
                StatusReport {
                    version,
                    pid,
                    uptime_secs,
                    idle_timeout_secs,
                    socket,
                    pool_dir,
                    pool,
                    repos,
                    queue,
                    trusted_at_their_word: vec!["s3://lab/lfs".into()],
                    commons_uploads: Vec::new(),
                    registry_engine: "postgres".into(),
                    team: Some(Box::new(TeamReport {
                        server: "postgresql://alice@db:5432/lab".into(),
                        node: "alice@login1".into(),
                        nodes: vec![TeamNode {
                            name: "alice@login1".into(),
                            host: "login1".into(),
                            user: "alice".into(),
                            last_seen: uptime_secs,
                            seen_secs_ago: 3,
                        }],
                        unreachable: None,
                    })),
                }
            },
        )
}

fn refused() -> impl Strategy<Value = Vec<RefusedPath>> {
    proptest::collection::vec(
        (proptest::collection::vec(text(), 0..3), oid(), text())
            .prop_map(|(paths, oid, why)| RefusedPath { paths, oid, why }),
        0..3,
    )
}

fn reply() -> impl Strategy<Value = Reply> {
    let strings = || proptest::collection::vec(text(), 0..3);
    let waiting = || {
        proptest::collection::vec(
            (text(), text(), job_state(), opt(text())).prop_map(|(path, url, state, error)| {
                PathWaiting {
                    path,
                    url,
                    state,
                    error,
                }
            }),
            0..3,
        )
    };
    prop_oneof![
        (any::<u32>(), text(), any::<u32>()).prop_map(|(version, server, pid)| Reply::Hello(
            HelloReply {
                version,
                server,
                pid
            }
        )),
        status().prop_map(|s| Reply::Status(Box::new(s))),
        proptest::collection::vec(repo_report(), 0..3).prop_map(|repos| Reply::Repos { repos }),
        repo_report().prop_map(|repo| Reply::Repo { repo }),
        (
            any::<u64>(),
            proptest::collection::vec(
                (text(), tier(), text(), proptest::option::of(text())).prop_map(
                    |(key, tier, problem, quarantined)| BadEntryReport {
                        key,
                        tier,
                        problem,
                        quarantined,
                    }
                ),
                0..3
            )
        )
            .prop_map(|(entries, bad)| Reply::Verify(VerifyReport { entries, bad })),
        (
            any::<bool>(),
            any::<[usize; 3]>(),
            proptest::collection::vec(
                (text(), tier(), any::<u64>()).prop_map(|(key, tier, bytes)| GcEntry {
                    key,
                    tier,
                    bytes
                }),
                0..3
            ),
            any::<[u64; 5]>()
        )
            .prop_map(|(dry_run, n, removed, b)| Reply::Gc(GcReport {
                dry_run,
                repos: n[0],
                kept: n[1],
                recent: n[2],
                removed,
                bytes: b[0],
                compacted: b[1],
                waiting: b[2] as usize,
                grace_secs: b[3],
                partials: PartialsRemoved {
                    files: b[4],
                    bytes: b[4] / 2,
                },
            })),
        (path(), any::<bool>()).prop_map(|(path, pool)| Reply::LfsObject(LfsObject {
            path,
            from: if pool {
                ObjectSource::Pool
            } else {
                ObjectSource::Remote
            },
        })),
        any::<bool>().prop_map(|skipped| Reply::LfsUploaded(LfsUploaded { skipped })),
        (path(), strings(), opt(text())).prop_map(|(repo, changed, remote)| Reply::Setup(
            SetupReport {
                repo,
                changed,
                remote
            }
        )),
        (any::<[u64; 7]>(), strings(), refused(), refused()).prop_map(
            |(n, trusted_sources, failed, refused)| Reply::PrePush(PushReport {
                objects: n[0],
                uploaded: n[1],
                present: n[2],
                copied: n[3],
                in_indexd: n[4],
                registered: n[5],
                trusted: n[6],
                trusted_sources,
                failed,
                refused,
            })
        ),
        (
            any::<[u64; 2]>(),
            proptest::collection::vec(".*", 0..3),
            proptest::collection::vec((".*", ".*"), 0..3),
            proptest::collection::vec((".*", oid(), any::<[u64; 3]>(), any::<[i64; 4]>()), 0..2)
        )
            .prop_map(
                |(n, to_git, left, stamps)| Reply::CheckedOut(CheckOutReport {
                    written: n[0],
                    bytes: n[1],
                    to_git,
                    left: left
                        .into_iter()
                        .map(|(path, why)| PathProblem { path, why })
                        .collect(),
                    stamps: stamps
                        .into_iter()
                        .map(|(path, oid, n, t)| FileStamp {
                            path,
                            oid,
                            size: n[0],
                            dev: n[1],
                            ino: n[2],
                            mtime: (t[0], t[1]),
                            ctime: (t[2], t[3]),
                        })
                        .collect(),
                })
            ),
        (any::<[u64; 4]>(), problems()).prop_map(|(n, failed)| Reply::Hydrated(HydrateReport {
            objects: n[0],
            present: n[1],
            from_pool: n[2],
            downloaded: n[3],
            failed,
        })),
        (
            path(),
            proptest::collection::vec(
                (
                    any::<usize>(),
                    (text(), text(), oid()),
                    any::<u64>(),
                    any::<bool>(),
                    oid_source()
                )
                    .prop_map(
                        |(line, (url, path, oid), size, provisional, oid_from)| {
                            AddedUrl {
                                line,
                                url,
                                path,
                                oid,
                                size,
                                provisional,
                                oid_from,
                            }
                        }
                    ),
                0..3
            ),
            proptest::collection::vec(
                (any::<usize>(), text(), text()).prop_map(|(line, url, message)| FailedUrl {
                    line,
                    url,
                    message
                }),
                0..3
            )
        )
            .prop_map(|(repo, added, failed)| Reply::AddUrl(AddUrlReport {
                repo,
                added,
                failed
            })),
        (path(), strings(), waiting(), strings()).prop_map(
            |(repo, rewritten, waiting, changed)| {
                Reply::Promoted(PromoteReport {
                    repo,
                    rewritten,
                    waiting,
                    changed,
                })
            }
        ),
        (path(), waiting())
            .prop_map(|(repo, pointers)| Reply::Provisional(ProvisionalReport { repo, pointers })),
        (path(), waiting(), strings()).prop_map(|(repo, fetching, hashed)| {
            Reply::Fetched(FetchReport {
                repo,
                fetching,
                hashed,
            })
        }),
        (text(), any::<[u64; 2]>(), any::<bool>()).prop_map(|(node, n, listed)| {
            Reply::TeamForgot(TeamForgetReport {
                node,
                repos: n[0],
                roots: n[1],
                listed,
            })
        }),
        (migrate_report(), any::<bool>()).prop_map(|(report, join)| match join {
            true => Reply::TeamJoined(report),
            false => Reply::TeamLeft(report),
        }),
        prune_report().prop_map(Reply::Pruned),
        Just(Reply::Done),
    ]
}

fn prune_report() -> impl Strategy<Value = PruneReport> {
    let proven = (any::<u32>(), text()).prop_map(|(place, how)| ProvenCopy { place, how });
    let object = (
        oid(),
        any::<u64>(),
        proptest::collection::vec(proven, 0..3),
        any::<[bool; 2]>(),
        opt(text()),
        any::<u32>(),
    )
        .prop_map(|(oid, size, proven, b, kept, repo_copies)| PrunedObject {
            oid,
            size,
            proven,
            freed: b[0],
            kept,
            repo_copies,
            pool: b[1],
        });
    (
        any::<bool>(),
        any::<u32>(),
        proptest::collection::vec(path(), 0..3),
        proptest::collection::vec(text(), 0..3),
        proptest::collection::vec(object, 0..3),
        any::<[u64; 4]>(),
    )
        .prop_map(|(dry_run, copies, repos, places, objects, n)| PruneReport {
            dry_run,
            copies,
            repos,
            places,
            objects,
            needed: n[0],
            freed: n[1],
            bytes: n[2],
            proofs: n[3],
        })
}

fn migrate_report() -> impl Strategy<Value = TeamMigrateReport> {
    (
        any::<[u64; 6]>(),
        proptest::collection::vec((text(), text()), 0..3),
    )
        .prop_map(|(n, refused)| TeamMigrateReport {
            copied: n[0],
            present: n[1],
            bytes: n[2],
            refused: refused
                .into_iter()
                .map(|(key, why)| RefusedEntry { key, why })
                .collect(),
            absent: n[3],
            repos: n[4],
            records: n[5],
        })
}

fn error_code() -> impl Strategy<Value = ErrorCode> {
    prop_oneof![
        Just(ErrorCode::BadRequest),
        Just(ErrorCode::TooLong),
        Just(ErrorCode::HandshakeRequired),
        Just(ErrorCode::VersionMismatch),
        Just(ErrorCode::PermissionDenied),
        Just(ErrorCode::InvalidArgument),
        Just(ErrorCode::NotFound),
        Just(ErrorCode::Internal),
        Just(ErrorCode::NoSpace),
    ]
}

fn response() -> impl Strategy<Value = ResponseFrame> {
    let progress = (stage(), any::<u64>(), opt(any::<u64>()), opt(text())).prop_map(
        |(stage, done, total, message)| Progress {
            stage,
            done,
            total,
            message,
        },
    );
    let body = prop_oneof![
        progress.prop_map(|progress| Body::Progress { progress }),
        reply().prop_map(|result| Body::Result { result }),
        (error_code(), text()).prop_map(|(code, message)| Body::Error {
            error: WireError { code, message }
        }),
    ];
    (opt(any::<u64>()), body).prop_map(|(id, body)| ResponseFrame { id, body })
}

/// Encodes `item` with the codec and decodes the one line it makes.
fn through_codec<T: serde::Serialize + serde::de::DeserializeOwned>(item: &T, max: usize) -> T {
    let mut codec = JsonLines::new(max);
    let mut buf = BytesMut::new();
    codec.encode(item, &mut buf).expect("the frame fits");
    assert_eq!(buf.iter().filter(|b| **b == b'\n').count(), 1, "one line");
    assert_eq!(buf.last(), Some(&b'\n'));
    let line = codec.decode(&mut buf).unwrap().expect("a whole line");
    assert!(buf.is_empty());
    match line {
        Line::Text(text) => serde_json::from_str(&text).expect("reads back"),
        other => panic!("decoded {other:?}"),
    }
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn any_bytes_cut_anywhere_frame_into_the_lines_of_the_model_holding_no_more_than_the_limit(
        input in wire_bytes(),
        chunks in proptest::collection::vec(1usize..70, 1..6),
        max in 0usize..40,
    ) {
        prop_assert_eq!(decode_all(&input, &chunks, max), model(&input, max));
    }

    #[test]
    fn a_line_far_over_the_limit_is_dropped_as_it_streams_in(
        len in 1000usize..20_000,
        chunk in 1usize..5000,
        after in "[a-z]{0,8}",
    ) {
        let max = 64;
        let mut input = vec![b'x'; len];
        input.push(b'\n');
        input.extend_from_slice(after.as_bytes());
        input.push(b'\n');
        let got = decode_all(&input, &[chunk], max);
        prop_assert_eq!(got, vec![Line::TooLong, Line::Text(after)]);
    }

    #[test]
    fn every_request_crosses_the_codec_unchanged(id in any::<u64>(), request in request()) {
        let frame = RequestFrame { id, request };
        prop_assert_eq!(through_codec(&frame, MAX_REQUEST_LINE), frame);
    }

    #[test]
    fn every_response_crosses_the_codec_unchanged(frame in response()) {
        prop_assert_eq!(through_codec(&frame, MAX_RESPONSE_LINE), frame);
    }
}
