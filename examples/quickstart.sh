#!/usr/bin/env bash
# drsd's quickstart: its real work, in a throwaway sandbox, with no S3 store.
#
# In a temporary folder with its own HOME (your git config, pool and daemon are
# not touched), it:
#   1. makes a repo whose LFS objects go to a folder (drsctl init --remote DIR);
#      the daemon starts on demand;
#   2. commits a large file through git-lfs and pushes it: the object lands in
#      the folder as {oid[0:2]}/{oid[2:4]}/{oid};
#   3. adds an object by URL from a local web server without reading it: its
#      pointer is provisional (an oid derived from the server's ETag);
#   4. waits while the daemon downloads and hashes it in the background, and
#      promotes the pointer to the content's sha256;
#   5. commits and pushes: the object goes from the pool into the folder;
#   6. clones the repo elsewhere: the objects come out of the pool, checked;
# and prints what happened at each step with the time it took.
#
#   usage: examples/quickstart.sh
#   env:   DRSD_BIN_DIR  folder holding drsd, drsctl and drs-hook (default: build
#                        them once with cargo, in release)
#          SIZE_MIB      size of the committed file (default 256) and, halved,
#                        of the object added by URL
#          KEEP=1        keep the sandbox (and its daemon) and print how to use it
# Needs git, git-lfs and python3 (the local web server).
set -euo pipefail
repo_root=$(cd "$(dirname "$0")/.." && pwd)
size_mib=${SIZE_MIB:-256}

need() {
  command -v "$1" >/dev/null 2>&1 && return
  echo "quickstart: $1 is missing: $2" >&2
  exit 1
}
need git "install git"
need git-lfs "install git-lfs (Debian and Ubuntu: apt install git-lfs; macOS: brew install git-lfs)"
need python3 "install python3: it serves the object added by URL"

if [ -n "${DRSD_BIN_DIR:-}" ]; then
  bin=$(cd "$DRSD_BIN_DIR" && pwd)
else
  need cargo "install Rust (rustup), or set DRSD_BIN_DIR to where drsd, drsctl and drs-hook are"
  echo "building drsd, drsctl and drs-hook (release; once, cargo keeps them)..."
  cargo build --release --bin drsd --bin drsctl --bin drs-hook --quiet --manifest-path "$repo_root/Cargo.toml"
  target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$repo_root/Cargo.toml" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  bin=$target/release
fi
for b in drsd drsctl drs-hook; do
  [ -x "$bin/$b" ] || { echo "quickstart: no $b in $bin" >&2; exit 1; }
done

# The sandbox: every folder drsd and git would use for this user is in it.
sandbox=$(mktemp -d "${TMPDIR:-/tmp}/drsd-quickstart.XXXXXX")
export HOME=$sandbox/home
export XDG_CONFIG_HOME=$HOME/.config XDG_DATA_HOME=$HOME/.local/share
export XDG_STATE_HOME=$HOME/.local/state XDG_CACHE_HOME=$HOME/.cache
export XDG_RUNTIME_DIR=$sandbox/run DRSD_SOCKET=$sandbox/run/drsd.sock
export PATH="$bin:$PATH" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
unset DRSD_POOL DRSD_STATE_DIR DRSD_CONFIG GIT_DIR GIT_WORK_TREE
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" "$sandbox/www"
chmod 700 "$XDG_RUNTIME_DIR"
git config --global user.name "drsd quickstart"
git config --global user.email "quickstart@example.org"
git config --global init.defaultBranch main
git lfs install --skip-repo >/dev/null

server_pid=
finish() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  if [ "${KEEP:-}" = 1 ]; then
    echo
    echo "kept: $sandbox (its daemon runs; stop it with: HOME=$HOME DRSD_SOCKET=$DRSD_SOCKET $bin/drsctl shutdown)"
  else
    drsctl shutdown >/dev/null 2>&1 || true
    rm -rf "$sandbox"
  fi
}
trap finish EXIT

declare -a timings=()
# step TITLE COMMAND...: runs it in the work repo, shows its output indented, times it.
step() {
  local title=$1
  shift
  printf '\n== %s\n' "$title"
  local t0 t1 secs
  t0=$(date +%s.%N)
  (cd "$work" && "$@") 2>&1 | sed 's/^/   /'
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  printf '   (%s s)\n' "$secs"
  timings+=("$(printf '%7s s  %s' "$secs" "$title")")
}
fail() {
  echo "quickstart: $*" >&2
  exit 1
}
pointer_oid() { sed -n 's/^oid sha256://p' "$1"; }

objects=$sandbox/objects          # the folder remote: could be NFS, Lustre, GPFS
bare=$sandbox/origin.git          # the git remote
work=$sandbox/work
mkdir -p "$objects" "$work"
git init -q --bare "$bare"
echo "sandbox: $sandbox"

step "drsctl init --remote $objects (the daemon starts on demand)" \
  bash -c 'git init -q . && drsctl init --remote "$0" && git lfs track "*.bam" "*.cram" >/dev/null &&
    git remote add origin "$1"' "$objects" "$bare"

head -c "$((size_mib << 20))" /dev/urandom >"$work/reads.bam"
step "git add + commit of a $size_mib MiB file through git-lfs" \
  bash -c 'git add .gitattributes reads.bam && git commit -qm "reads" && git lfs ls-files'

step "git push: the object goes to the folder" \
  bash -c 'git push -q origin main 2>&1 && find "$0" -type f -printf "%P (%s bytes)\n"' "$objects"
oid=$(sha256sum "$work/reads.bam" | cut -d' ' -f1)
[ -f "$objects/${oid:0:2}/${oid:2:2}/$oid" ] || fail "reads.bam is not in $objects after the push"

# A sequencing run's output, already on a web server.
head -c "$((size_mib << 19))" /dev/urandom >"$sandbox/www/sample.cram"
want=$(sha256sum "$sandbox/www/sample.cram" | cut -d' ' -f1)
coproc SERVER { exec python3 "$repo_root/examples/quickstart-server.py" "$sandbox/www"; }
server_pid=$SERVER_PID
read -r port <&"${SERVER[0]}"
url=http://127.0.0.1:$port/sample.cram

step "drsctl add-url $url sample.cram (no byte read)" \
  bash -c 'drsctl add-url "$0" sample.cram &&
    echo "pointer now: $(sed -n "s/^oid //p" sample.cram) (provisional: from the ETag)"' "$url"

step "drsctl promote --all --wait: prefetched and hashed in the background, promoted" \
  bash -c 'drsctl promote --all --wait && echo "pointer now: $(git show :sample.cram | sed -n "s/^oid //p")"'
[ "$(git -C "$work" show :sample.cram | sed -n 's/^oid sha256://p')" = "$want" ] ||
  fail "sample.cram's staged pointer does not carry the content's sha256 $want"

step "git commit + push: the object goes from the pool into the folder" \
  bash -c 'git add sample.cram && git commit -qm "sample, by URL" && git push -q origin main 2>&1 &&
    find "$0" -type f -printf "%P (%s bytes)\n"' "$objects"
[ -f "$objects/${want:0:2}/${want:2:2}/$want" ] || fail "sample.cram is not in $objects after the push"

step "drsctl clone: another work tree, its objects out of the pool" \
  bash -c 'cd .. && drsctl clone "$0" copy && cd copy && git lfs ls-files && sha256sum reads.bam sample.cram' "$bare"
cmp -s "$sandbox/copy/reads.bam" "$work/reads.bam" || fail "the clone's reads.bam differs"
cmp -s "$sandbox/copy/sample.cram" "$sandbox/www/sample.cram" || fail "the clone's sample.cram differs"

step "drsctl status" drsctl status

printf '\n== what it took\n'
printf '%s\n' "${timings[@]}"
echo
echo "every object checked: the folder, the pool and the clone hold bytes whose sha256 is their oid."
echo "next: README.md, Quickstart (your own repo, a folder or an S3 remote)."
