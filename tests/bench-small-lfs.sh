#!/usr/bin/env bash
# Small-object push and clone against stock git-lfs + giftless, all against
# the same Ceph RGW, in one run (issue 14 item 5; markdown on stdout):
#   (a) push, then a fresh clone, of 2,000 x 16 KiB LFS files:
#       - drsd: `drsctl init --remote s3://...`, `git push` (the pre-push hook
#         and the agent), `drsctl clone` against a second daemon whose pool is
#         empty;
#       - stock git-lfs 3 with giftless (a real Git LFS server) whose storage
#         is the same RGW (its S3 storage with a custom endpoint: git-lfs PUTs
#         and GETs RGW through the presigned URLs giftless hands out);
#       - what RGW itself serves: `aws s3 sync` and `rclone copy` of the same
#         files up and down.
#   (b) a clone of 200 x 16 KiB + one 512 MiB file into an empty pool:
#       `drsctl clone` against `git clone` (pointers only) + `aws s3 sync` /
#       + `rclone copy` of the same bytes from a bucket.
# Every row is the median of RUNS (3) runs, each on fresh buckets and pools.
#   usage: tests/with-servers.sh tests/bench-small-lfs.sh   (by hand, not CI)
# Env: RUNS (3), SMALL (2000), MIXED_SMALL (200), MIXED_MIB (512),
#      JOBS ("a b": which of the two to run),
#      DRSD_PEERS_VENV (a venv with giftless, boto3 and flask; made if missing),
#      DRSD_BASE_BIN (a folder of another build, an earlier commit's, whose
#      `drsctl clone` (b) also measures in the same runs).

set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3} JOBS=${JOBS:-a b} SMALL=${SMALL:-2000} MIXED_SMALL=${MIXED_SMALL:-200} MIXED_MIB=${MIXED_MIB:-512}
: "${AWS_ENDPOINT_URL:?run under tests/with-servers.sh}"
export AWS_REGION=${AWS_REGION:-us-east-1} AWS_DEFAULT_REGION=${AWS_REGION:-us-east-1}
# Newer botocore adds checksums RGW may not know; only where required.
export AWS_REQUEST_CHECKSUM_CALCULATION=when_required AWS_RESPONSE_CHECKSUM_VALIDATION=when_required

# The peers, installed when missing: rclone from Debian; giftless, boto3,
# flask and the AWS CLI in a venv of their own.
need_apt() { command -v "$1" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$2" >/dev/null; }; }
need_apt rclone rclone
need_apt git-lfs git-lfs
peers_ok() {
  [ -x "$1/bin/python" ] && [ -x "$1/bin/aws" ] && "$1/bin/python" -c '
import giftless.app, boto3, flask, jwt
assert tuple(map(int, jwt.__version__.split(".")[:2])) < (2, 10)' 2>/dev/null
}
venv=""
for v in "${DRSD_PEERS_VENV:-}" /opt/peers "${XDG_CACHE_HOME:-$HOME/.cache}/drsd-peers"; do
  if [ -n "$v" ] && peers_ok "$v"; then venv=$v; break; fi
done
if [ -z "$venv" ]; then
  venv=${DRSD_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/drsd-peers}
  need_apt python3 python3-venv
  python3 -m venv "$venv"
  # giftless 0.6 declares none of what it imports: name them. PyJWT 2.10 on
  # refuses its verify tokens (an anonymous user's "sub" is null).
  "$venv/bin/pip" install -q giftless boto3 awscli flask flask-classful flask-marshmallow \
    marshmallow webargs python-dateutil python-dotenv figcan "pyjwt<2.10" cachetools pyyaml \
    typing-extensions requests >&2
fi
AWS=$venv/bin/aws PY=$venv/bin/python

# DRSD_BENCH_BIN: a folder of built binaries to measure (an older build, say).
if [ -n "${DRSD_BENCH_BIN:-}" ]; then bin=$DRSD_BENCH_BIN
else cargo build -q --release --bins; bin=$PWD/target/release; fi
export PATH=$bin:$PATH DRSD_BIN=$bin/drsd DRSD_NO_AUTOSTART=1
work=$(mktemp -d /var/tmp/drsd-bench-small.XXXXXX)
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; pids=(); }
trap 'stop_all; rm -rf "$work"' EXIT
export HOME=$work/home GIT_TERMINAL_PROMPT=0
mkdir -p "$HOME"
git config --global user.name bench; git config --global user.email bench@example.org
git config --global init.defaultBranch main
git config --global lfs.concurrenttransfers 32   # stock's best: as many in flight as ours
git lfs install --skip-repo >/dev/null
# rclone's remote `rgw:`, from the environment alone.
export RCLONE_CONFIG_RGW_TYPE=s3 RCLONE_CONFIG_RGW_PROVIDER=Ceph \
  RCLONE_CONFIG_RGW_ENDPOINT=$AWS_ENDPOINT_URL RCLONE_CONFIG_RGW_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID \
  RCLONE_CONFIG_RGW_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY RCLONE_CONFIG_RGW_REGION=$AWS_REGION
# AWS_CA_BUNDLE (nginx's certificate, for https) breaks rclone's http client.
rc() { env -u AWS_CA_BUNDLE rclone -q --config /dev/null --transfers 32 --checkers 32 "$@"; }
# The AWS CLI at the same concurrency as the others.
mkdir -p "$HOME/.aws"
printf '[default]\ns3 =\n  max_concurrent_requests = 32\n' > "$HOME/.aws/config"

now() { date +%s.%N; }
# Before each timed job: nothing dirty, and, where this user may, nothing
# cached. A buffered write of 512 MiB took 0.14 s on a settled machine and
# 1.5-1.8 s behind another one's pages here: left as it was, the order of
# the jobs would decide the table.
settle() { sync; echo 3 2>/dev/null > /proc/sys/vm/drop_caches || true; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
make_bucket() {
  curl -sf --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X PUT "$AWS_ENDPOINT_URL/$1" -o /dev/null
}
# A daemon with its own pool: `daemon NAME` sets DRSD_* for what follows.
daemon() {
  export DRSD_SOCKET=$work/$1/run/drsd.sock DRSD_POOL=$work/$1/pool DRSD_STATE_DIR=$work/$1/state
  mkdir -p "$work/$1"
  drsd serve --ready ${DRSD_VERBOSE:+-v} > "$work/$1.ready" 2> "$work/$1.log" &
  pids+=($!)
  for _ in $(seq 100); do grep -q ready "$work/$1.ready" 2>/dev/null && return; sleep 0.05; done
  echo "drsd $1 did not start" >&2; exit 1
}
# `make_files DIR N [MIB]`: N random 16 KiB files, and one of MIB MiB.
make_files() {
  mkdir -p "$1"
  "$PY" - "$1" "$2" <<'PY'
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], f"f{i:04}.bin"), "wb") as f:
        f.write(os.urandom(16384))
PY
  if [ -n "${3:-}" ]; then head -c $(($3 << 20)) /dev/urandom > "$1/huge.bin"; fi
}

# giftless serving the LFS API on $gport, storage in bucket $1 on RGW.
gport=$((20000 + RANDOM % 20000))
giftless_up() {
  cat > "$work/giftless.yaml" <<YAML
AUTH_PROVIDERS:
  - giftless.auth.allow_anon:read_write
TRANSFER_ADAPTERS:
  basic:
    factory: giftless.transfer.basic_external:factory
    options:
      storage_class: giftless.storage.amazon_s3:AmazonS3Storage
      storage_options:
        bucket_name: $1
        endpoint: $AWS_ENDPOINT_URL
        path_prefix: lfs
# The verify action's token: giftless's default key is too short for PyJWT.
PRE_AUTHORIZED_ACTION_PROVIDER:
  options:
    private_key: $(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
YAML
  GIFTLESS_CONFIG_FILE=$work/giftless.yaml "$venv/bin/flask" --app giftless.wsgi_entrypoint \
    run --host 127.0.0.1 --port "$gport" --with-threads > "$work/giftless.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    # Any HTTP answer will do (000: nothing listens yet).
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$gport/")" != 000 ] && return
    sleep 0.1
  done
  echo "giftless did not start: $(tail -5 "$work/giftless.log")" >&2; exit 1
}

# Every file of $1 is in $2 with the same bytes, or the bench stops.
same() {
  local f
  for f in "$1"/*; do
    cmp -s "$f" "$2/${f##*/}" || { echo "$2/${f##*/} differs from $f" >&2; exit 1; }
  done
}
declare -A t
# Each figure also goes to standard error as it is measured: a run that
# dies (RGW stalled under load) still leaves what it measured.
add() { t[$1]="${t[$1]:-} $2"; echo "measured: $1 $2" >&2; }

# (a) 2,000 x 16 KiB, one run.
small_run() {
  local r=$1 d=$work/a$r
  make_files "$d/files" "$SMALL"
  # drsd
  daemon "push-a$r"
  make_bucket "drs-a$r-$$"
  git init -q "$d/drs"; (cd "$d/drs" && drsctl init --remote "s3://drs-a$r-$$/lfs" >/dev/null)
  git -C "$d/drs" lfs track '*.bin' >/dev/null
  cp -r "$d/files/." "$d/drs/"; git -C "$d/drs" add . && git -C "$d/drs" commit -qm data
  git init -q --bare "$d/drs.git"; git -C "$d/drs" remote add origin "$d/drs.git"
  settle; s=$(now); git -C "$d/drs" push -q origin main; add drs_push "$(since "$s")"
  daemon "clone-a$r"
  settle; s=$(now); (cd "$d" && drsctl clone "$d/drs.git" drs-clone >/dev/null); add drs_clone "$(since "$s")"
  same "$d/files" "$d/drs-clone"
  stop_all
  # stock git-lfs + giftless, storage on the same RGW
  make_bucket "gl-a$r-$$"; giftless_up "gl-a$r-$$"
  git init -q "$d/gl"; git -C "$d/gl" lfs install --local >/dev/null
  git -C "$d/gl" lfs track '*.bin' >/dev/null
  git -C "$d/gl" config -f .lfsconfig lfs.url "http://127.0.0.1:$gport/bench/gl"
  cp -r "$d/files/." "$d/gl/"; git -C "$d/gl" add . && git -C "$d/gl" commit -qm data
  git init -q --bare "$d/gl.git"; git -C "$d/gl" remote add origin "$d/gl.git"
  settle; s=$(now); git -C "$d/gl" push -q origin main 2>"$work/gl-push.err" || { cat "$work/gl-push.err" "$work/giftless.log" | tail -30 >&2; exit 1; }
  add gl_push "$(since "$s")"
  settle; s=$(now); git clone -q "$d/gl.git" "$d/gl-clone" 2>/dev/null; add gl_clone "$(since "$s")"
  same "$d/files" "$d/gl-clone"
  stop_all
  # RGW's own rate: the same files up and down by the AWS CLI and rclone.
  make_bucket "aws-a$r-$$"; make_bucket "rc-a$r-$$"
  settle; s=$(now); "$AWS" s3 sync --quiet "$d/files" "s3://aws-a$r-$$/x"; add aws_up "$(since "$s")"
  settle; s=$(now); "$AWS" s3 sync --quiet "s3://aws-a$r-$$/x" "$d/aws-down"; add aws_down "$(since "$s")"
  settle; s=$(now); rc copy "$d/files" "rgw:rc-a$r-$$/x"; add rc_up "$(since "$s")"
  settle; s=$(now); rc copy "rgw:rc-a$r-$$/x" "$d/rc-down"; add rc_down "$(since "$s")"
  rm -rf "$d"
}

# (b) 200 x 16 KiB + one 512 MiB file, one run.
mixed_run() {
  local r=$1 d=$work/b$r
  make_files "$d/files" "$MIXED_SMALL" "$MIXED_MIB"
  daemon "push-b$r"
  make_bucket "drs-b$r-$$"
  git init -q "$d/drs"; (cd "$d/drs" && drsctl init --remote "s3://drs-b$r-$$/lfs" >/dev/null)
  git -C "$d/drs" lfs track '*.bin' >/dev/null
  cp -r "$d/files/." "$d/drs/"; git -C "$d/drs" add . && git -C "$d/drs" commit -qm data
  git init -q --bare "$d/drs.git"; git -C "$d/drs" remote add origin "$d/drs.git"
  git -C "$d/drs" push -q origin main
  daemon "clone-b$r"
  settle; s=$(now); (cd "$d" && drsctl clone "$d/drs.git" drs-clone >/dev/null); add mix_drs "$(since "$s")"
  same "$d/files" "$d/drs-clone"
  stop_all
  if [ -n "${DRSD_BASE_BIN:-}" ]; then
    local path=$PATH; PATH=$DRSD_BASE_BIN:$PATH
    daemon "clone-base-b$r"
    settle; s=$(now); (cd "$d" && drsctl clone "$d/drs.git" base-clone >/dev/null); add mix_base "$(since "$s")"
    same "$d/files" "$d/base-clone"
    stop_all; PATH=$path
  fi
  # The peers: the pointers by git, the bytes from a bucket that holds them.
  make_bucket "plain-b$r-$$"; "$AWS" s3 sync --quiet "$d/files" "s3://plain-b$r-$$/x"
  settle; s=$(now); GIT_LFS_SKIP_SMUDGE=1 git clone -q "$d/drs.git" "$d/g1"; add mix_git "$(since "$s")"
  settle; s=$(now); GIT_LFS_SKIP_SMUDGE=1 git clone -q "$d/drs.git" "$d/g2"
  "$AWS" s3 sync --quiet "s3://plain-b$r-$$/x" "$d/g2/data"; add mix_aws "$(since "$s")"
  settle; s=$(now); GIT_LFS_SKIP_SMUDGE=1 git clone -q "$d/drs.git" "$d/g3"
  rc copy "rgw:plain-b$r-$$/x" "$d/g3/data"; add mix_rc "$(since "$s")"
  same "$d/files" "$d/g2/data"; same "$d/files" "$d/g3/data"
  rm -rf "$d"
}

case " $JOBS " in *" a "*)
  for r in $(seq "$RUNS"); do small_run "$r"; echo "run $r of (a) done" >&2; done;; esac
case " $JOBS " in *" b "*)
  for r in $(seq "$RUNS"); do mixed_run "$r"; echo "run $r of (b) done" >&2; done;; esac

m() { median ${t[$1]}; }
ratio() { awk -v p="$1" -v o="$2" 'BEGIN { printf "%.2f×", p / o }'; }
runs() { echo "${t[$1]}" | sed 's/^ //; s/ /, /g'; }
if [ -n "${t[drs_push]:-}" ]; then
echo "### (a) $SMALL × 16 KiB, push and clone (s; median of $RUNS, the runs in brackets)"
echo
echo "| path | push | clone | push: peer / drsd | clone: peer / drsd |"
echo "|---|---|---|---|---|"
printf '| drsd (pre-push hook + agent; drsctl clone, empty pool) | %s (%s) | %s (%s) | 1.00× | 1.00× |\n' \
  "$(m drs_push)" "$(runs drs_push)" "$(m drs_clone)" "$(runs drs_clone)"
printf '| stock git-lfs + giftless, storage on the same RGW | %s (%s) | %s (%s) | %s | %s |\n' \
  "$(m gl_push)" "$(runs gl_push)" "$(m gl_clone)" "$(runs gl_clone)" \
  "$(ratio "$(m gl_push)" "$(m drs_push)")" "$(ratio "$(m gl_clone)" "$(m drs_clone)")"
printf '| `aws s3 sync` of the files (no git) | %s (%s) | %s (%s) | %s | %s |\n' \
  "$(m aws_up)" "$(runs aws_up)" "$(m aws_down)" "$(runs aws_down)" \
  "$(ratio "$(m aws_up)" "$(m drs_push)")" "$(ratio "$(m aws_down)" "$(m drs_clone)")"
printf '| `rclone copy --transfers 32` of the files (no git) | %s (%s) | %s (%s) | %s | %s |\n' \
  "$(m rc_up)" "$(runs rc_up)" "$(m rc_down)" "$(runs rc_down)" \
  "$(ratio "$(m rc_up)" "$(m drs_push)")" "$(ratio "$(m rc_down)" "$(m drs_clone)")"
echo
fi
[ -n "${t[mix_drs]:-}" ] || exit 0
echo "### (b) clone of $MIXED_SMALL × 16 KiB + 1 × $MIXED_MIB MiB into an empty pool (s; median of $RUNS)"
echo
echo "| path | clone | peer / drsd |"
echo "|---|---|---|"
printf '| `drsctl clone` | %s (%s) | 1.00× |\n' "$(m mix_drs)" "$(runs mix_drs)"
if [ -n "${t[mix_base]:-}" ]; then
  printf '| `drsctl clone`, %s | %s (%s) | %s |\n' "$DRSD_BASE_BIN" "$(m mix_base)" "$(runs mix_base)" "$(ratio "$(m mix_base)" "$(m mix_drs)")"
fi
printf '| `git clone` (pointers only) | %s (%s) | %s |\n' "$(m mix_git)" "$(runs mix_git)" "$(ratio "$(m mix_git)" "$(m mix_drs)")"
printf '| `git clone` + `aws s3 sync` | %s (%s) | %s |\n' "$(m mix_aws)" "$(runs mix_aws)" "$(ratio "$(m mix_aws)" "$(m mix_drs)")"
printf '| `git clone` + `rclone copy` | %s (%s) | %s |\n' "$(m mix_rc)" "$(runs mix_rc)" "$(ratio "$(m mix_rc)" "$(m mix_drs)")"
