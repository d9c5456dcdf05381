#!/usr/bin/env bash
# drsctl add-url, measured (markdown on stdout):
#   (a) the time of one add-url against the object's size: nginx serving
#       sparse files from 1 MiB to 100 GiB, Ceph RGW objects from 1 MiB to
#       1 GiB; against `git add` through git-lfs of a 1 GiB local file;
#   (c) 10,000 URLs through `add-url --from`, in URLs/s: with a
#       .gitattributes line per path (what add-url writes), and with the
#       paths already covered by one pattern.
# Debug binaries (the workspace builds dependencies with opt-level 3).
#   usage: tests/with-servers.sh tests/bench-add-url.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DRSD_TEST_WWW:?run under tests/with-servers.sh}"
cargo build -q --workspace --bins
bin=${CARGO_TARGET_DIR:-$PWD/target}/debug
export PATH=$bin:$PATH DRSD_BIN=$bin/drsd DRSD_NO_AUTOSTART=1
work=$(mktemp -d /var/tmp/drsd-bench-addurl.XXXXXX)
www=$DRSD_TEST_WWW/bench-$$
bucket=bench-addurl-$$
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

export DRSD_SOCKET=$work/run/drsd.sock DRSD_POOL=$work/pool DRSD_STATE_DIR=$work/state
drsd serve --ready -v > "$work/ready" 2> "$work/drsd.log" &
daemon_pid=$!
for _ in $(seq 100); do grep -q ready "$work/ready" 2>/dev/null && break; sleep 0.05; done

ns() { date +%s%N; }
ms_since() { echo $(( ($(ns) - $1) / 1000000 )); }
# median, min, max of the numbers on standard input
stats() { sort -n | awk '{ a[NR] = $1 } END { printf "%d | %d | %d", a[int((NR + 1) / 2)], a[1], a[NR] }'; }
repo() { rm -rf "$1"; git init -q "$1"; }
human() { numfmt --to=iec-i --suffix=B "$1"; }

# (a) one add-url, 5 times per size (a new path each time), from drsctl's start to its exit.
repo "$work/sizes"; cd "$work/sizes"
time_adds() {  # URL NAME
  for i in 1 2 3 4 5; do
    t=$(ns); drsctl add-url "$1" "$2-$i" >/dev/null; ms_since "$t"
  done | stats
}
echo "### (a) one \`drsctl add-url\` against the object's size (5 runs each, ms)"
echo
echo "| store | object size | median | min | max |"
echo "|---|---|---|---|---|"
for size in $((1 << 20)) $((64 << 20)) $((1 << 30)) $((10 << 30)) $((100 << 30)); do
  truncate -s "$size" "$www/sparse-$size.bin"
  echo "| nginx https | $(human "$size") | $(time_adds "$DRSD_TEST_HTTPS_URL/bench-$$/sparse-$size.bin" "n$size") |"
done
aws() { command aws --endpoint-url "$AWS_ENDPOINT_URL" "$@"; }
aws s3 mb "s3://$bucket" >/dev/null
for size in $((1 << 20)) $((64 << 20)) $((1 << 30)); do
  head -c "$size" /dev/urandom > "$work/obj.bin"
  aws s3 cp --quiet "$work/obj.bin" "s3://$bucket/obj-$size.bin"
  echo "| Ceph RGW s3:// | $(human "$size") | $(time_adds "s3://$bucket/obj-$size.bin" "s$size") |"
done
# The baseline: the same 1 GiB bytes as a local file through git-lfs's clean filter.
for i in 1 2 3; do
  repo "$work/lfs-$i"; cd "$work/lfs-$i"
  git lfs track '*.bin' >/dev/null; cp "$work/obj.bin" big.bin
  t=$(ns); git add big.bin; ms_since "$t"
done | stats | sed 's/^/| git add through git-lfs (local file) | 1.0GiB | /; s/$/ |/'
aws s3 rm --quiet --recursive "s3://$bucket"; aws s3 rb "s3://$bucket" >/dev/null
echo

# (c) 10,000 URLs through --from.
mkdir -p "$www/many"
for i in $(seq -f %05g 0 9999); do printf 'object %s\n' "$i" > "$www/many/f$i.bin"; done
for i in $(seq -f %05g 0 9999); do
  echo "$DRSD_TEST_HTTPS_URL/bench-$$/many/f$i.bin data/f$i.bin"
done > "$work/list.txt"
batch() {  # NAME [PATTERN]
  repo "$work/$1"; cd "$work/$1"
  if [ -n "${2:-}" ]; then git lfs track "$2" >/dev/null; git add .gitattributes; git commit -qm track; fi
  t=$(ns); drsctl add-url --from "$work/list.txt" >/dev/null; took=$(ms_since "$t")
  staged=$(git diff --cached --name-only -- data | wc -l)
  t=$(ns); git status --porcelain >/dev/null; status=$(ms_since "$t")
  phases=$(grep 'add-url of 10000' "$work/drsd.log" | tail -1 | sed 's/.*objects: //')
  awk -v n=10000 -v ms="$took" -v s="$staged" -v st="$status" -v what="$3" -v ph="$phases" \
    'BEGIN { printf "| %s | %.2f s | %.0f | %d | %d ms | %s |\n", what, ms / 1000, n / (ms / 1000), s, st, ph }'
}
echo "### (c) 10,000 URLs (nginx https) through \`drsctl add-url --from\`"
echo
echo "| .gitattributes | time | URLs/s | staged | git status after | daemon's phases after the HEADs |"
echo "|---|---|---|---|---|---|"
batch per-path "" "one line per path (written by add-url)"
batch pattern 'data/*.bin' "covered by \`data/*.bin\`"
