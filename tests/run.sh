#!/usr/bin/env bash
# Every test of the project, from a fresh machine: installs what the tests
# drive (system packages), builds the binaries, runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/ci/install-system-deps.sh

# A real single-node Ceph RGW on loopback for the S3 tests; stopped on exit.
work=$(mktemp -d "${TMPDIR:-/tmp}/drsd-tests.XXXXXX")
trap 'tests/ci/rgw-down.sh "$work/rgw" >/dev/null 2>&1; rm -rf "$work"' EXIT
MONPORT=${DRSD_TEST_MONPORT:-16789} RGW_MEM_BYTES=$((6 << 30)) \
  tests/ci/rgw-up.sh "$work/rgw" "${DRSD_TEST_RGW_PORT:-18000}"
# shellcheck disable=SC1091
source "$work/rgw/env"
export AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION
# The end-to-end tests drive the real binaries: build them in the same profile.
cargo build --workspace --bins
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
else
  cargo test --workspace --no-fail-fast
fi
