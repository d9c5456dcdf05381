#!/usr/bin/env bash
# Runs a command with a real single-node Ceph RGW on loopback, its endpoint and
# credentials in the AWS_* environment; stops the servers when it ends.
#   usage: tests/with-servers.sh COMMAND [ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/drsd-servers.XXXXXX")
trap 'tests/ci/rgw-down.sh "$work/rgw" >/dev/null 2>&1; rm -rf "$work"' EXIT
MONPORT=${DRSD_TEST_MONPORT:-16789} RGW_MEM_BYTES=${RGW_MEM_BYTES:-$((6 << 30))} \
  tests/ci/rgw-up.sh "$work/rgw" "${DRSD_TEST_RGW_PORT:-18000}"
# shellcheck disable=SC1091
source "$work/rgw/env"
export AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION
"$@"
