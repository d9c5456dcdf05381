#!/usr/bin/env bash
# Every test of the project, from a fresh machine: installs what the tests
# drive (system packages), starts the servers they talk to (Ceph RGW on
# loopback), builds the binaries, runs the GA4GH DRS compliance suite against
# the tests' DRS server, runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/ci/install-system-deps.sh
# The end-to-end tests drive the real binaries: build them in the same profile.
cargo build --workspace --bins
# The tests' DRS server held to the GA4GH DRS compliance suite (fails unless PASS).
tests/ci/drs-compliance.sh
# nextest runs each test in a process of its own, which the end-to-end
# tests need (they set the environment of the process they run in): it is
# installed when missing, never replaced by `cargo test`.
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install cargo-nextest --locked
fi
exec tests/with-servers.sh cargo nextest run --workspace --no-fail-fast
