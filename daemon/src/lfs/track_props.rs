//! Property tests of `.gitattributes` editing (`cargo nextest run -p drsd
//! props`), held against the real git: for any batch of path names
//! (unicode, spaces, `#`, `!`, glob characters, quotes, backslashes, tabs,
//! newlines, very long ones), `track_and_stage` either refuses the batch
//! naming a path git cannot be told about, or the lines it writes make
//! `git check-attr` say `filter=lfs` for exactly those paths and for none of
//! their near neighbours (same name in another folder, a glob character
//! taken literally, one character more, another case).
//!
//! One limit is by design: a space is written `[[:space:]]` (as `git lfs
//! track` does; a literal space ends the pattern), which also matches a tab
//! or other white space there, so such neighbours are not generated.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use proptest::prelude::*;

use super::track::{attributes, attributes_in_work_tree, track_and_stage, tracked, TrackError};
use crate::props::config;

fn component() -> impl Strategy<Value = String> {
    let c = prop_oneof![
        8 => prop::sample::select(vec![
            'a', 'b', 'Z', '0', '.', '-', '_', ' ', '#', '!', '*', '?', '[', ']', '\\', '"',
            '\'', '=', ':', 'é', '😀', '\u{a0}', '\u{3000}',
        ]),
        1 => prop::sample::select(vec!['\t', '\n', '\r', '\u{b}', '\u{c}', '\u{1}']),
        1 => any::<char>().prop_filter("a file name character", |c| *c != '/' && *c != '\0'),
    ];
    prop_oneof![
        12 => proptest::collection::vec(c, 1..8).prop_map(|v| v.into_iter().collect::<String>()),
        // Long enough that its line passes git's 2048-byte limit.
        1 => (150usize..240).prop_map(|n| " ".repeat(n)),
    ]
    .prop_filter("a name a folder can hold", |s| {
        s != "." && s != ".." && s.len() <= 255 && !s.eq_ignore_ascii_case(".git")
    })
}

fn path() -> impl Strategy<Value = String> {
    proptest::collection::vec(component(), 1..4).prop_map(|c| c.join("/"))
}

/// Paths with no two where one is a folder of the other (both must be
/// creatable), and not `.gitattributes` itself.
fn batch() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(path(), 1..12).prop_map(|paths| {
        let (mut files, mut dirs, mut kept) = (BTreeSet::new(), BTreeSet::new(), Vec::new());
        for p in paths {
            let parents: Vec<String> = p
                .match_indices('/')
                .map(|(i, _)| p[..i].to_string())
                .collect();
            if p == ".gitattributes"
                || files.contains(&p)
                || dirs.contains(&p)
                || parents.iter().any(|d| files.contains(d))
            {
                continue;
            }
            dirs.extend(parents);
            files.insert(p.clone());
            kept.push(p);
        }
        kept
    })
}

/// Near neighbours of `path` that only a loose pattern would match.
fn neighbours(path: &str) -> Vec<String> {
    let mut out = vec![
        format!("zz/{path}"),
        format!("{path}x"),
        format!("x{path}"),
        format!("{path}/inner"),
    ];
    if let Some((_, name)) = path.rsplit_once('/') {
        out.push(name.to_string());
    }
    for special in ['*', '?', '[', ']', '\\', '"', '#', '!'] {
        if path.contains(special) {
            out.push(path.replacen(special, "x", 1));
            out.push(path.replacen(special, "", 1));
        }
    }
    if path.contains('*') {
        out.push(path.replacen('*', "ab/c", 1));
    }
    let flipped: String = path
        .chars()
        .map(|c| match c {
            'a' => 'A',
            'Z' => 'z',
            c => c,
        })
        .collect();
    out.push(flipped);
    // Only repo-relative file paths: git refuses to answer for others.
    out.retain(|n| {
        !n.contains(['\t', '\n', '\r'])
            && n.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
    });
    out
}

fn git_init(dir: &Path) {
    let out = Command::new("git")
        .args(["init", "-q"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A path `track_and_stage` refused, having written nothing.
#[derive(Debug)]
struct Refused(String);

/// Tracks `paths` in a fresh repo, or names the path it refused (having
/// written nothing).
fn track_fresh(paths: &[String]) -> Result<tempfile::TempDir, Refused> {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path();
    git_init(top);
    for p in paths {
        let file = top.join(p);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "pointer\n").unwrap();
    }
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    match track_and_stage(top, &refs) {
        Ok(added) => {
            assert_eq!(added, paths.len());
            Ok(tmp)
        }
        Err(TrackError::Unexpressible { path, .. }) => {
            assert!(paths.contains(&path), "refused {path:?}, not in the batch");
            assert!(!top.join(".gitattributes").exists(), "refused, yet written");
            Err(Refused(path))
        }
        Err(e) => panic!("{e}"),
    }
}

proptest! {
    // Three or four git processes a case.
    #![proptest_config(config(40))]

    #[test]
    fn a_tracked_batch_matches_exactly_its_paths_or_is_refused(mut paths in batch()) {
        // A refusal names one path: the batch goes on without it.
        let top = loop {
            match track_fresh(&paths) {
                Ok(top) => break top,
                Err(Refused(refused)) => paths.retain(|p| *p != refused),
            }
        };
        let wanted: BTreeSet<&str> = paths.iter().map(String::as_str).collect();
        let mut asked: Vec<&str> = wanted.iter().copied().collect();
        let near: Vec<String> = paths.iter().flat_map(|p| neighbours(p)).collect();
        asked.extend(near.iter().map(String::as_str).filter(|n| !wanted.contains(n)));
        let got = tracked(top.path(), &asked).unwrap();
        for (path, lfs) in asked.iter().zip(got) {
            prop_assert_eq!(lfs, wanted.contains(path), "{:?} (batch {:?})", path, paths);
        }
    }
}

/// Lines a user may have in the top `.gitattributes` besides drsd's: some
/// match the generated paths, some set what add-url must see (another
/// filter, an encoding), one is a macro, one looks like drsd's but is not.
const USER_LINES: [&str; 8] = [
    "*.bin filter=lfs diff=lfs merge=lfs -text",
    "*a* -filter",
    "[attr]enc working-tree-encoding=UTF-16LE",
    "*Z* enc",
    "**/b* ident",
    "/a* filter=lfs diff=lfs merge=lfs -text",
    "* !filter",
    "/zz/a filter=lfs diff=lfs merge=lfs -text\r",
];

proptest! {
    #![proptest_config(config(40))]

    #[test]
    fn attributes_without_unrelated_lines_are_those_of_the_work_tree(
        paths in batch(),
        user in proptest::collection::vec((0..USER_LINES.len(), any::<bool>()), 0..4),
        picks in proptest::collection::vec(any::<bool>(), 12),
        ignore_case in any::<bool>(),
        nested in any::<bool>(),
    ) {
        let mut paths = paths;
        let top = loop {
            match track_fresh(&paths) {
                Ok(top) => break top,
                Err(Refused(refused)) => paths.retain(|p| *p != refused),
            }
        };
        let top_path = top.path();
        // The user's lines, before or after drsd's.
        let file = top_path.join(".gitattributes");
        let mut text = std::fs::read_to_string(&file).unwrap_or_default();
        for (i, after) in user {
            match after {
                true => text.push_str(&format!("{}\n", USER_LINES[i])),
                false => text.insert_str(0, &format!("{}\n", USER_LINES[i])),
            }
        }
        std::fs::write(&file, text).unwrap();
        if ignore_case {
            let out = Command::new("git").arg("-C").arg(top_path)
                .args(["config", "core.ignoreCase", "true"]).output().unwrap();
            prop_assert!(out.status.success());
        }
        if nested {
            if let Some((folder, _)) = paths.iter().find_map(|p| p.split_once('/')) {
                std::fs::write(top_path.join(folder).join(".gitattributes"), "* -filter\n").unwrap();
            }
        }
        // Some of the batch, their neighbours, and `.gitattributes` itself.
        let mut asked: Vec<String> = paths.iter().zip(&picks)
            .filter(|(_, pick)| **pick).map(|(p, _)| p.clone()).collect();
        let near: Vec<String> = asked.iter().flat_map(|p| neighbours(p)).collect();
        asked.extend(near);
        asked.push(".gitattributes".into());
        let asked: Vec<&str> = asked.iter().map(String::as_str).collect();
        let seen = attributes(top_path, &asked).unwrap();
        let truth = attributes_in_work_tree(top_path, &asked).unwrap();
        for ((path, s), t) in asked.iter().zip(&seen).zip(&truth) {
            prop_assert_eq!(s, t, "{:?} (batch {:?})", path, paths);
        }
    }
}
