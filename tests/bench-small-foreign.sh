#!/usr/bin/env bash
# Many small foreign objects, from add-url to promoted (issue 14 item 2), by
# hand, not CI: N files of 4 KiB served by a private nginx over http;
# `drsctl add-url --from LIST` then `drsctl promote --all --wait`, every
# pointer then checked to carry its file's sha256; the baseline, in the same
# run, is `curl --parallel --parallel-max 32` of the same URLs then
# `sha256sum`. One line of results per run.
#   usage: tests/bench-small-foreign.sh N [PRE]
#   PRE: the repo first holds PRE promoted pointers (added the same way,
#        committed), to see the cost grow with the repo, or not.
# Env: BIN (the binaries to measure; default: target/release, built first),
#      WORKDIR (/var/tmp; /dev/shm for tmpfs), PORT (48080), NOFETCH=1
#      (add-url --no-fetch only), PERF=1 (perf record of the daemon into
#      $WORKDIR/perf.data; PERF_GRAPH=dwarf for call stacks through code
#      built without frame pointers), VERBOSE=1 (the daemon logs at debug into
#      $WORKDIR/drsd-small.*/d/log), KEEP=1 (keep the work folder), TRACK=PATTERN
#      (`git lfs track PATTERN` first, committed: add-url then writes no
#      `.gitattributes` line per path).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000} PRE=${2:-0}
if [ -z "${BIN:-}" ]; then cargo build -q --release --bins; BIN=$PWD/target/release; fi
WORKDIR=${WORKDIR:-/var/tmp} PORT=${PORT:-48080}
w=$(mktemp -d "$WORKDIR/drsd-small.XXXXXX")
chmod 755 "$w"  # nginx's workers run as nobody when started by root
dpid=
cleanup() {
  [ -n "$dpid" ] && kill "$dpid" 2>/dev/null
  nginx -c "$w/nginx/nginx.conf" -p "$w/nginx" -s quit >/dev/null 2>&1
  [ -n "${KEEP:-}" ] || rm -rf "$w"
}
trap cleanup EXIT
tests/ci/nginx-up.sh "$w/nginx" "$PORT" >/dev/null
www=$w/nginx/www web=http://127.0.0.1:$PORT
mkdir -p "$www/s" "$www/p"
python3 - "$www" "$N" "$PRE" <<'PY'
import os, sys
www, n, pre = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    open(f"{www}/s/f{i:05d}.bin", "wb").write(os.urandom(4096))
for i in range(pre):
    open(f"{www}/p/p{i:05d}.bin", "wb").write(os.urandom(4096))
PY
: > "$w/list"; : > "$w/curl"; : > "$w/pre"
for f in "$www"/s/*.bin; do
  n=${f##*/}
  echo "$web/s/$n data/$n" >> "$w/list"
  printf 'url = "%s"\noutput = "c/%s"\n' "$web/s/$n" "$n" >> "$w/curl"
done
for f in "$www"/p/*.bin; do [ -e "$f" ] && echo "$web/p/${f##*/} pre/${f##*/}" >> "$w/pre"; done
export HOME=$w/home DRSD_SOCKET=$w/d/run/drsd.sock DRSD_POOL=$w/d/pool DRSD_STATE_DIR=$w/d/state \
  DRSD_NO_AUTOSTART=1 PATH=$BIN:$PATH
mkdir -p "$HOME" "$w/d"
git config --global user.name bench; git config --global user.email bench@example.org
git config --global init.defaultBranch main
git lfs install --skip-repo >/dev/null
drsd serve ${VERBOSE:+-v} --ready > "$w/d/ready" 2> "$w/d/log" &
dpid=$!
for _ in $(seq 200); do grep -q ready "$w/d/ready" 2>/dev/null && break; sleep 0.05; done
mkdir "$w/r"; cd "$w/r"; git init -q .
if [ -n "${TRACK:-}" ]; then
  git lfs track "$TRACK" >/dev/null; git add .gitattributes; git commit -qm track
fi
if [ "$PRE" -gt 0 ]; then
  drsctl add-url --from "$w/pre" >/dev/null; drsctl promote --all --wait >/dev/null; git commit -qm pre
fi
cpu_ms() { awk '{ print ($14 + $15) * 10 }' "/proc/$dpid/stat"; }  # 100 ticks a second
ms() { date +%s%3N; }
[ -n "${PERF:-}" ] && { perf record -F 2999 --call-graph ${PERF_GRAPH:-fp} -p "$dpid" -o "$WORKDIR/perf.data" >/dev/null 2>&1 & ppid=$!; sleep 0.5; }
c0=$(cpu_ms) t0=$(ms)
drsctl add-url ${NOFETCH:+--no-fetch} --from "$w/list" >/dev/null
t1=$(ms)
[ -n "${NOFETCH:-}" ] || drsctl promote --all --wait >/dev/null
t2=$(ms) c1=$(cpu_ms)
[ -n "${PERF:-}" ] && { kill -INT "$ppid"; wait "$ppid" || true; }
bad=0
for f in "$www"/s/*.bin; do
  grep -q "$(sha256sum < "$f" | cut -c1-64)" "data/${f##*/}" || bad=$((bad + 1))
done
[ -n "${NOFETCH:-}" ] || [ "$bad" = 0 ] || { echo "$bad pointers do not carry their content's sha256" >&2; exit 1; }
mkdir -p "$w/cc"; cd "$w/cc"
t3=$(ms)
curl -s --no-progress-meter --fail --parallel --parallel-max 32 --create-dirs -K "$w/curl" && sha256sum c/* >/dev/null
t4=$(ms)
awk -v n="$N" -v pre="$PRE" -v track="${TRACK:--}" -v a=$((t1 - t0)) -v p=$((t2 - t0)) -v c=$((t4 - t3)) -v cpu=$((c1 - c0)) \
  'BEGIN { printf "N=%d PRE=%d TRACK=%s add-url=%dms promoted=%dms curl+sha256sum=%dms ratio=%.2f daemon_cpu=%dms\n", n, pre, track, a, p, c, p / c, cpu }'
