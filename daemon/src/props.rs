//! Shared by the property tests (`*_props.rs`, run by `cargo nextest run -p
//! drsd props`): a bounded case count for CI that `PROPTEST_CASES` overrides
//! for a longer run by hand. docs/fuzzing.md says what each suite covers.

use proptest::test_runner::Config;

/// `cases` unless `PROPTEST_CASES` asks for more (or fewer).
pub(crate) fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        // A failure prints its minimal input; nothing is written into the
        // source tree.
        failure_persistence: None,
        ..Config::default()
    }
}
