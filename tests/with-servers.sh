#!/usr/bin/env bash
# Runs a command with the servers the end-to-end tests talk to, on loopback,
# and stops them when it ends:
# - a real single-node Ceph RGW: endpoint and credentials in the AWS_* environment;
# - nginx (tests/ci/nginx-up.sh) serving DRSD_TEST_WWW over http and https:
#   DRSD_TEST_HTTP_URL, DRSD_TEST_HTTPS_URL, and DRSD_CA_FILE (its self-signed
#   certificate, which drsd trusts as an extra root);
# - PostgreSQL (tests/ci/pg-up.sh): DRSD_TEST_PG_URL, a superuser's libpq URL;
#   one server for every test, each test making its own database.
# Ports: DRSD_TEST_MONPORT (16789), DRSD_TEST_RGW_PORT (18000),
# DRSD_TEST_NGINX_PORT (18080; https on the next port),
# DRSD_TEST_PG_PORT (15432).
#   usage: tests/with-servers.sh COMMAND [ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/drsd-servers.XXXXXX")
stop() {
  [ -f "$work/nginx/nginx.pid" ] && nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" -s quit >/dev/null 2>&1
  tests/ci/rgw-down.sh "$work/rgw" >/dev/null 2>&1
  tests/ci/pg-down.sh "$work/pg" >/dev/null 2>&1
  rm -rf "$work"
}
trap stop EXIT
# nginx's workers run as nobody when started by root: they must reach www/.
chmod 755 "$work"
# RGW keeps objects in RAM: the 4 GiB test holds its source and its
# server-side copy at once, beside what the other tests store.
MONPORT=${DRSD_TEST_MONPORT:-16789} RGW_MEM_BYTES=${RGW_MEM_BYTES:-$((14 << 30))} \
  tests/ci/rgw-up.sh "$work/rgw" "${DRSD_TEST_RGW_PORT:-18000}"
# shellcheck disable=SC1091
source "$work/rgw/env"
export AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION
nginx_port=${DRSD_TEST_NGINX_PORT:-18080}
tests/ci/nginx-up.sh "$work/nginx" "$nginx_port"
export DRSD_TEST_WWW="$work/nginx/www"
export DRSD_TEST_HTTP_URL="http://127.0.0.1:$nginx_port"
export DRSD_TEST_HTTPS_URL="https://127.0.0.1:$((nginx_port + 1))"
export DRSD_CA_FILE="$work/nginx/cert.pem"
tests/ci/pg-up.sh "$work/pg" "${DRSD_TEST_PG_PORT:-15432}"
# shellcheck disable=SC1091
source "$work/pg/env"
export DRSD_TEST_PG_URL
"$@"
