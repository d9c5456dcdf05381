#!/usr/bin/env bash
# drsctl gc, measured (markdown on stdout): a pool holding the objects of
# two repos of N small LFS files each, one repo then unregistered, so half
# the pool is garbage. drsctl gc --dry-run and gc against `git lfs prune
# --dry-run` and `git lfs prune` in a clone holding the same count of
# objects of which half are unreferenced (the stock tool's own job in one
# repo). No servers needed.
#   usage: tests/bench-gc.sh [N]   (default 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5000}
cargo build -q --workspace --bins
bin=${CARGO_TARGET_DIR:-$PWD/target}/debug
export PATH=$bin:$PATH DRSD_BIN=$bin/drsd DRSD_NO_AUTOSTART=1
work=$(mktemp -d /var/tmp/drsd-bench-gc.XXXXXX)
daemon_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export HOME=$work/home GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME"
git config --global user.name bench; git config --global user.email bench@example.org
git config --global init.defaultBranch main
git lfs install --skip-repo >/dev/null

export DRSD_SOCKET=$work/run/drsd.sock DRSD_POOL=$work/pool DRSD_STATE_DIR=$work/state
drsd serve --ready > "$work/ready" 2> "$work/drsd.log" &
daemon_pid=$!
for _ in $(seq 100); do grep -q ready "$work/ready" 2>/dev/null && break; sleep 0.05; done

ns() { date +%s%N; }
ms_since() { echo $(( ($(ns) - $1) / 1000000 )); }
# A repo of N LFS files with distinct contents (tag makes them differ).
lfs_repo() {  # DIR TAG
  git init -q "$1"; cd "$1"
  git lfs track '*.bin' >/dev/null
  for i in $(seq "$n"); do echo "$2 object $i" > "f$i.bin"; done
  git add . && git commit -qm "$n objects"
  cd - >/dev/null
}
lfs_repo "$work/keep" keep
lfs_repo "$work/drop" drop
for r in keep drop; do drsctl repos add "$work/$r" >/dev/null; done
# The daemon adopts both repos' objects into the pool on its scan.
until [ "$(drsd stats --json | python3 -c 'import json,sys; print(sum(t["entries"] for t in json.load(sys.stdin)["tiers"]))')" -ge $((2 * n)) ]; do
  sleep 0.5
done
drsctl repos remove "$work/drop" >/dev/null

t=$(ns); drsctl --json gc --dry-run --grace 0 > "$work/dry.json"; dry_ms=$(ms_since "$t")
t=$(ns); drsctl --json gc --grace 0 > "$work/gc.json"; gc_ms=$(ms_since "$t")
removed=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["removed"]))' "$work/gc.json")
[ "$removed" -eq "$n" ] || { echo "gc removed $removed, expected $n" >&2; exit 1; }

# Stock: one repo whose .git/lfs/objects holds N referenced objects and N
# that only an old, unreachable commit pointed at.
cd "$work/keep"
cp -r "$work/drop/.git/lfs/objects/." .git/lfs/objects/
t=$(ns); git lfs prune --dry-run >/dev/null 2>&1; prune_dry_ms=$(ms_since "$t")
t=$(ns); git lfs prune >/dev/null 2>&1; prune_ms=$(ms_since "$t")
left=$(find .git/lfs/objects -type f | wc -l)
[ "$left" -eq "$n" ] || { echo "git lfs prune left $left, expected $n" >&2; exit 1; }

ratio() { python3 -c "import sys; print(f'{int(sys.argv[1]) / max(int(sys.argv[2]), 1):.2f}x')" "$1" "$2"; }
echo "### drsctl gc: $n of $((2 * n)) pool entries unreferenced"
echo
echo "| what | ms | stock's time / ours |"
echo "|---|---|---|"
echo "| \`drsctl gc --dry-run\` (one registered repo's object database read) | $dry_ms | $(ratio "$prune_dry_ms" "$dry_ms") |"
echo "| \`drsctl gc\` | $gc_ms | $(ratio "$prune_ms" "$gc_ms") |"
echo "| \`git lfs prune --dry-run\` (one repo, $((2 * n)) objects) | $prune_dry_ms | |"
echo "| \`git lfs prune\` | $prune_ms | |"
