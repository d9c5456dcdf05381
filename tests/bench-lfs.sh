#!/usr/bin/env bash
# The Git LFS path against stock git-lfs, in one run (markdown on stdout):
#   (a) push, then a fresh clone, of 2,000 x 16 KiB objects and of one 1 GiB
#       object: drsd's agent to Ceph RGW vs git-lfs's built-in transfer to a
#       local bare remote (no network at all);
#   (c) a second clone on the same machine, served from the pool: time, and
#       bytes that crossed loopback (where RGW is) during it.
#   usage: tests/with-servers.sh tests/bench-lfs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release --bins
bin=$PWD/target/release
export PATH=$bin:$PATH DRSD_BIN=$bin/drsd DRSD_NO_AUTOSTART=1
: "${AWS_ENDPOINT_URL:?run under tests/with-servers.sh}"
work=$(mktemp -d /var/tmp/drsd-bench.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
export HOME=$work/home GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME"
git config --global user.name bench; git config --global user.email bench@example.org
git config --global init.defaultBranch main
git lfs install --skip-repo >/dev/null   # stock clones smudge through git-lfs

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f s", b - a }'; }
# How many times faster than stock: stock's time over ours.
ratio() { awk -v s="${1% s}" -v o="${2% s}" 'BEGIN { printf "%.2f×", s / o }'; }
# Bytes received on loopback so far (RGW is there; git and the daemon socket are not).
lo_bytes() { awk '/^ *lo:/ { sub(/.*lo:/, ""); split($0, a, " "); print a[1] }' /proc/net/dev; }
# A daemon with its own pool: `daemon NAME` sets DRSD_* for what follows.
daemon() {
  export DRSD_SOCKET=$work/$1/run/drsd.sock DRSD_POOL=$work/$1/pool DRSD_STATE_DIR=$work/$1/state
  mkdir -p "$work/$1"
  drsd serve --ready > "$work/$1.ready" 2> "$work/$1.log" &
  pids+=($!)
  for _ in $(seq 100); do grep -q ready "$work/$1.ready" 2>/dev/null && return; sleep 0.05; done
  echo "drsd $1 did not start" >&2; exit 1
}
# Files for a data set: `make_files DIR small|large`.
make_files() {
  mkdir -p "$1"
  if [ "$2" = small ]; then
    python3 - "$1" <<'PY'
import os, sys
for i in range(2000):
    with open(os.path.join(sys.argv[1], f"f{i:04}.bin"), "wb") as f:
        f.write(os.urandom(16384))
PY
  else
    head -c $((1 << 30)) /dev/urandom > "$1/huge.bin"
  fi
}
# A committed repo at $1 holding data set $2; $3 = drs remote url or "stock".
source_repo() {
  git init -q "$1"
  if [ "$3" = stock ]; then git -C "$1" lfs install --local >/dev/null
  else (cd "$1" && drsctl init --remote "$3" >/dev/null); fi
  git -C "$1" lfs track '*.bin' >/dev/null
  make_files "$1" "$2"
  git -C "$1" add . && git -C "$1" commit -qm data
}

# Buckets exist before drsd meets them (as in production): curl makes this one.
make_bucket() {
  curl -sf --aws-sigv4 "aws:amz:${AWS_REGION:-us-east-1}:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X PUT "$AWS_ENDPOINT_URL/$1" -o /dev/null
}

row() { printf '| %s | %s | %s | %s | %s |\n' "$@"; }
echo "| data | path | push | fresh clone | clone speed vs stock |"
echo "|---|---|---|---|---|"
declare -A stock_clone
for set in small large; do
  label=$([ $set = small ] && echo "2,000 × 16 KiB" || echo "1 × 1 GiB")
  # Stock git-lfs: a bare remote on the same disk, its built-in file transfer.
  s=$work/stock-$set; source_repo "$s/src" $set stock
  git init -q --bare "$s/remote.git"; git -C "$s/src" remote add origin "$s/remote.git"
  sync; t=$(now); git -C "$s/src" push -q origin main 2>/dev/null; push=$(since "$t")
  sync; t=$(now); git clone -q "$s/remote.git" "$s/clone" 2>/dev/null; clone=$(since "$t")
  stock_clone[$set]=$clone
  row "$label" "stock git-lfs, local bare remote" "$push" "$clone" "1.00×"
  # drsd: agent to RGW; the clone runs against a second daemon with an empty pool.
  d=$work/drs-$set; bucket=bench-$set-$$
  daemon "pusher-$set"
  make_bucket "$bucket"
  source_repo "$d/src" $set "s3://$bucket/lfs"
  git init -q --bare "$d/remote.git"; git -C "$d/src" remote add origin "$d/remote.git"
  sync; t=$(now); git -C "$d/src" push -q origin main; push=$(since "$t")
  daemon "cloner-$set"
  sync; t=$(now); (cd "$d" && drsctl clone "$d/remote.git" clone >/dev/null); clone=$(since "$t")
  row "$label" "drsd agent, Ceph RGW, a clone's empty pool" "$push" "$clone" "$(ratio "${stock_clone[$set]}" "$clone")"
  # (c) the same machine again: the pool has everything.
  before=$(lo_bytes); t=$(now); (cd "$d" && drsctl clone "$d/remote.git" clone2 >/dev/null); clone=$(since "$t")
  net=$(( $(lo_bytes) - before ))
  # Ceph's own daemons talk on loopback all the time: the same span, idle.
  before=$(lo_bytes); sleep "${clone% s}"; idle=$(( $(lo_bytes) - before ))
  row "$label" "drsd, second clone from the pool: $net bytes on loopback ($idle idle)" "" "$clone" "$(ratio "${stock_clone[$set]}" "$clone")"
done
