#!/usr/bin/env bash
# Holds the tests' DRS server to the GA4GH DRS compliance suite (1.0.3, which
# tests DRS 1.2.0): starts the built drs-test-server with its fixed objects
# behind HTTP Basic auth, runs the suite against it and fails unless the
# report's status is PASS (the suite itself exits 0 whatever it finds).
#
# The suite as published needs a module it does not ship
# (supported_drs_versions), Werkzeug 2.2 for its Flask, and jsonschema: the
# venv and the shim below supply them. Bulk requests stay off here: they are
# DRS 1.4, and the suite's 1.2.0 service-info schema forbids the `drs` field
# that advertises them (additionalProperties: false).
#
#   usage: tests/ci/drs-compliance.sh    (after `cargo build --workspace --bins`)
# The venv is kept in $TARGET/drs-compliance/venv, the last report in
# $TARGET/drs-compliance/report.json ($TARGET: $CARGO_TARGET_DIR or target/).
set -euo pipefail
cd "$(dirname "$0")/../.."
target=$(realpath -m "${CARGO_TARGET_DIR:-target}")
server_bin="$target/debug/drs-test-server"
[ -x "$server_bin" ] || { echo "drs-compliance: no $server_bin: cargo build --workspace --bins first" >&2; exit 1; }
out="$target/drs-compliance"
venv="$out/venv"
mkdir -p "$out"
if [ ! -x "$venv/bin/drs-compliance-suite" ]; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    drs-compliance-suite==1.0.3 jsonschema 'werkzeug==2.2.3'
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/drs-compliance.XXXXXX")
server_pid=
stop() {
  # The killed server's status (143) must not become this script's.
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap stop EXIT

user=compliance password=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
"$server_bin" --basic "$user:$password" >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
base_url=
for _ in $(seq 1 100); do
  base_url=$(head -n1 "$work/server.out" 2>/dev/null || true)
  [ -n "$base_url" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.err" >&2; exit 1; }
  sleep 0.1
done
[ -n "$base_url" ] || { echo "drs-compliance: drs-test-server did not start" >&2; exit 1; }

# The objects drs-test-server serves (tests/bin/drs_test_server.rs); the
# Indexd record's did goes percent-encoded, as DRS ids do in paths.
basic=$(printf '%s:%s' "$user" "$password" | base64 -w0)
record='dg.TEST%2F1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9'
object() { printf '{"drs_id": "%s", "auth_type": "basic", "auth_token": "%s", "is_bundle": %s}' "$1" "$basic" "$2"; }
cat >"$work/config.json" <<JSON
{
  "service_info": {"auth_type": "none", "auth_token": ""},
  "drs_object_info": [
    $(object blob-served false),
    $(object blob-signed false),
    $(object blob-s3 false),
    $(object "$record" false),
    $(object bundle-1 true)
  ],
  "drs_object_access": [
    $(object blob-signed false)
  ]
}
JSON

mkdir -p "$work/shim"
echo 'SUPPORTED_DRS_VERSIONS = ["1.2.0"]' >"$work/shim/supported_drs_versions.py"
# The suite writes ./output and ./logs where it runs.
(cd "$work" && PYTHONPATH="$work/shim" "$venv/bin/drs-compliance-suite" \
  --server_base_url "$base_url/ga4gh/drs/v1" --platform_name drsd-ci \
  --platform_description "drsd's test DRS server" --drs_version 1.2.0 \
  --config_file "$work/config.json" --report_path "$work/report.json" >"$work/suite.log" 2>&1) \
  || { cat "$work/suite.log" >&2; exit 1; }
cp "$work/report.json" "$out/report.json"

"$venv/bin/python" - "$out/report.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
print("drs-compliance:", report["status"], report["summary"])
if report["status"] != "PASS":
    for phase in report["phases"]:
        for test in phase["tests"]:
            for case in test["cases"]:
                if case["status"] not in ("PASS", "SKIP"):
                    print(f'  {case["status"]}: {test["test_name"]}: {case["case_name"]}: {case["message"]}')
    sys.exit(1)
PY
