#!/usr/bin/env bash
# Per-object cost at scale, and prune at scale (issue 41), markdown on stdout:
#   (a) N 4 KiB objects added by URL from the local nginx and promoted, in
#       one repo: `drsctl add-url --from LIST` then `drsctl promote --all
#       --wait`, with the first and second `git status` after it;
#   (b) the same objects committed, pushed (to a folder remote, and to Ceph
#       RGW), removed in a second commit and pushed: `drsctl prune` of the N
#       objects only the old commit names, with its proofs.
# Debug binaries, like the other benchmarks. N defaults to 2000 20000 100000.
#   usage: tests/with-servers.sh tests/bench-scale.sh [N...]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DRSD_TEST_WWW:?run under tests/with-servers.sh}"
cargo build -q --workspace --bins
bin=${CARGO_TARGET_DIR:-$PWD/target}/debug
export PATH=$bin:$PATH DRSD_BIN=$bin/drsd DRSD_NO_AUTOSTART=1
work=$(mktemp -d /var/tmp/drsd-bench-scale.XXXXXX)
www=$DRSD_TEST_WWW/scale-$$
daemon_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null
  rm -rf "$work" "$www"
}
trap cleanup EXIT
export HOME=$work/home GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME" "$www"
git config --global user.name bench; git config --global user.email bench@example.org
git config --global init.defaultBranch main
git lfs install --skip-repo >/dev/null

start_daemon() {
  export DRSD_SOCKET=$work/run/drsd.sock DRSD_POOL=$work/pool-$1 DRSD_STATE_DIR=$work/state-$1
  drsd serve --ready > "$work/ready-$1" 2> "$work/drsd-$1.log" &
  daemon_pid=$!
  for _ in $(seq 100); do grep -q ready "$work/ready-$1" 2>/dev/null && break; sleep 0.05; done
}
stop_daemon() { drsctl shutdown >/dev/null; wait "$daemon_pid" 2>/dev/null || true; daemon_pid=; }
elapsed() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }'; }

counts=("$@"); [ ${#counts[@]} -gt 0 ] || counts=(2000 20000 100000)
aws() { command aws --endpoint-url "$AWS_ENDPOINT_URL" "$@"; }

echo "### (a) add-url and promotion of N 4 KiB objects, then git status"
echo
echo "| N | add-url --from (s) | promote --all --wait (s) | ms per object | first git status (s) | second git status (s) |"
echo "|---|---|---|---|---|---|"
declare -A prune_rows
for n in "${counts[@]}"; do
  dir=$www/n$n; mkdir -p "$dir"
  python3 - "$dir" "$n" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    seed = f"{n}-{i}".encode()
    with open(os.path.join(d, f"{i}.bin"), "wb") as f:
        f.write((seed * (4096 // len(seed) + 1))[:4096])
PY
  seq 0 $((n - 1)) | awk -v u="$DRSD_TEST_HTTP_URL/scale-$$/n$n" '{ print u "/" $1 ".bin data/" $1 ".bin" }' > "$work/list-$n"
  start_daemon "$n"
  repo=$work/repo-$n; git init -q "$repo"; cd "$repo"
  t=$(date +%s%N); drsctl add-url --from "$work/list-$n" >/dev/null; add=$(elapsed "$t")
  t=$(date +%s%N); drsctl promote --all --wait >/dev/null; promote=$(elapsed "$t")
  sleep 1.5  # the daemon's index refresh, a second after the last promotion
  t=$(date +%s%N); git status --porcelain >/dev/null; first=$(elapsed "$t")
  t=$(date +%s%N); git status --porcelain >/dev/null; second=$(elapsed "$t")
  per=$(awk -v a="$add" -v p="$promote" -v n="$n" 'BEGIN { printf "%.3f", (a + p) * 1000 / n }')
  echo "| $n | $add | $promote | $per | $first | $second |"

  # (b) prune of the N objects, once pushed, once removed: this repo to
  # a folder remote, a second one (the same URLs) to RGW.
  for remote in folder rgw; do
    if [ "$remote" = folder ]; then
      mkdir -p "$work/objects-$n"; drsctl init --remote "$work/objects-$n" >/dev/null
    else
      repo=$work/repo-$n-rgw; git init -q "$repo"; cd "$repo"
      drsctl add-url --from "$work/list-$n" >/dev/null
      drsctl promote --all --wait >/dev/null
      bucket=scale-$n-$$; aws s3 mb "s3://$bucket" >/dev/null
      drsctl init --remote "s3://$bucket/lfs" >/dev/null
    fi
    git add -A && git commit -qm "$n objects"
    git init -q --bare "$work/bare-$n-$remote.git"
    git remote add origin "$work/bare-$n-$remote.git"
    t=$(date +%s%N); git push -q origin main 2>/dev/null; push=$(elapsed "$t")
    git rm -rq data && git commit -qm "drop the data" && git push -q origin main 2>/dev/null
    t=$(date +%s%N); drsctl --json prune "$repo" > "$work/prune-$n-$remote.json"; took=$(elapsed "$t")
    read -r freed proofs bytes < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["freed"], r["proofs"], r["bytes"])' "$work/prune-$n-$remote.json")
    prune_rows[$n-$remote]="| $n | $remote | $push | $took | $freed | $proofs | $(numfmt --to=iec-i --suffix=B "$bytes") |"
  done
  stop_daemon
  rm -rf "$dir"
done
echo
echo "### (b) drsctl prune of N pushed objects only an old commit names"
echo
echo "| N | object remote | push (s) | prune (s) | freed | proofs (HEADs or hashes) | bytes freed |"
echo "|---|---|---|---|---|---|---|"
for n in "${counts[@]}"; do
  for remote in folder rgw; do echo "${prune_rows[$n-$remote]}"; done
done
