#!/usr/bin/env bash
# drsd side by side with the tools a data steward would pick instead (issue 14),
# in one run: every job runs each tool REPS times, interleaved (drsd, then each
# peer, then the next repetition), and prints a markdown table of the median
# times and of each peer's ratio to drsd (peer's median / drsd's: above 1 means
# drsd is faster). Run by hand, not by CI.
#
#   usage: tests/bench-peers.sh [JOB...]      (all jobs by default)
#   jobs:  addurl      add-url of 1 and of N_ADD URLs (nginx http) vs
#                      `git annex addurl --fast [--batch]`, `dvc import-url --no-download`
#          download    download + sha256 of one SIZE_MIB object from RGW and from
#                      nginx: drsd add-url + promote --wait vs curl + sha256sum,
#                      rclone + sha256sum, aws s3 cp + sha256sum, git annex addurl,
#                      dvc import-url
#          small       N_SMALL x 4 KiB foreign objects (nginx http), add-url to
#                      promoted vs curl --parallel + sha256sum, git annex addurl
#          lfs         push and fresh clone of LFS_N x 16 KiB and of 1 x LFS_BIG_MIB:
#                      drsd's git-lfs agent to RGW vs stock git-lfs + giftless (a
#                      Git LFS server; its S3 storage on the same RGW), aws s3 sync,
#                      rclone copy
#
# Knobs (environment):
#   REPS=3              repetitions of each tool in each job (median shown)
#   SIZE_MIB=2048       the download job's object
#   N_ADD=1000          URLs in the add-url batch
#   DVC_N=20            dvc has no batch import-url: it runs on the first DVC_N of
#                       the N_ADD URLs, one call each, and its time is scaled up
#   N_SMALL=1000        4 KiB objects in the small job
#   LFS_N=2000          16 KiB files in the lfs job;  LFS_BIG_MIB=1024  its big file
#   LFS_SETS="small big"  which of the lfs job's two data sets run
#   WORKDIR=/var/tmp    where the repos, pools and downloads live (e.g. /dev/shm
#                       for tmpfs)
#   PEERS_VENV=target/peers-venv   venv for awscli, dvc and dvc-s3
#   GIFTLESS_VENV=$PEERS_VENV-giftless   venv for giftless and gunicorn (apart:
#                       giftless's boto3 wants another botocore than dvc-s3's
#                       aiobotocore; giftless's wheel declares no dependencies, so
#                       they are named here; PyJWT 2.10 and later refuse the
#                       null subject of its anonymous user's tokens, a 401 on
#                       every verify). Both are created and filled by pip
#                       when a tool is missing.
#   GIFTLESS_STORAGE=s3 giftless's storage: s3 (the same RGW) or local
#   DRSD_TEST_MONPORT, DRSD_TEST_RGW_PORT, DRSD_TEST_NGINX_PORT, RGW_MEM_BYTES:
#                       passed to tests/with-servers.sh, which this script starts
#                       itself unless it already runs under it
#   GIFTLESS_PORT       default: the nginx port + 5
# Memory: RGW's memstore OSD does not give back what deleted objects took: a whole
# default run writes some 40 GiB through it and the OSD grew past 11 GiB of RSS here
# (RGW_MEM_BYTES notwithstanding). On a small machine run the jobs one at a time,
# each under its own servers (`tests/bench-peers.sh download`, then `small`, ...).
# Installs git-annex and rclone with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=${CARGO_TARGET_DIR:-$root/target}

if [ -z "${DRSD_TEST_WWW:-}" ]; then
  # Peers first (before the servers take memory), then the build, then the servers.
  missing=()
  command -v git-annex >/dev/null || missing+=(git-annex)
  command -v rclone >/dev/null || missing+=(rclone)
  if [ ${#missing[@]} -gt 0 ]; then
    sudo=$([ "$(id -u)" = 0 ] || echo sudo)
    $sudo apt-get update -q && $sudo apt-get install -y -q "${missing[@]}"
  fi
  venv=${PEERS_VENV:-$target/peers-venv}
  if ! { [ -x "$venv/bin/aws" ] && [ -x "$venv/bin/dvc" ] && "$venv/bin/python" -c 'import dvc_s3' 2>/dev/null; }; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q awscli dvc dvc-s3
  fi
  gvenv=${GIFTLESS_VENV:-$venv-giftless}
  if ! { [ -x "$gvenv/bin/gunicorn" ] && "$gvenv/bin/python" -c 'import giftless.wsgi_entrypoint, jwt
assert tuple(map(int, jwt.__version__.split(".")[:2])) < (2, 10)' 2>/dev/null; }; then
    [ -x "$gvenv/bin/python" ] || python3 -m venv "$gvenv"
    "$gvenv/bin/pip" install -q giftless gunicorn boto3 flask flask-classful flask-marshmallow \
      marshmallow webargs figcan pyyaml python-dotenv 'pyjwt<2.10' cachetools python-dateutil typing-extensions
  fi
  cargo build -q --release --bins
  export PEERS_VENV=$venv GIFTLESS_VENV=$gvenv RGW_MEM_BYTES=${RGW_MEM_BYTES:-$((8 << 30))}
  exec tests/with-servers.sh "$0" "$@"
fi

: "${AWS_ENDPOINT_URL:?run under tests/with-servers.sh}"
venv=${PEERS_VENV:-$target/peers-venv}
gvenv=${GIFTLESS_VENV:-$venv-giftless}
bin=$target/release
export PATH=$bin:$venv/bin:$PATH DRSD_BIN=$bin/drsd DRSD_NO_AUTOSTART=1
REPS=${REPS:-3} SIZE_MIB=${SIZE_MIB:-2048} N_ADD=${N_ADD:-1000} DVC_N=${DVC_N:-20}
N_SMALL=${N_SMALL:-1000} LFS_N=${LFS_N:-2000} LFS_BIG_MIB=${LFS_BIG_MIB:-1024}
LFS_SETS=${LFS_SETS:-small big}
GIFTLESS_STORAGE=${GIFTLESS_STORAGE:-s3}
nginx_port=${DRSD_TEST_HTTP_URL##*:}
GIFTLESS_PORT=${GIFTLESS_PORT:-$((nginx_port + 5))}
jobs=("$@"); [ ${#jobs[@]} -gt 0 ] || jobs=(addurl download small lfs)

work=$(mktemp -d "${WORKDIR:-/var/tmp}/drsd-bench-peers.XXXXXX")
www=$DRSD_TEST_WWW/peers-$$
web=$DRSD_TEST_HTTP_URL/peers-$$
daemon_pid= giftless_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null
  [ -n "$giftless_pid" ] && kill "$giftless_pid" 2>/dev/null
  for b in $(aws s3 ls 2>/dev/null | awk '{print $3}' | grep "^peers-$$-" || true); do
    aws s3 rb --force "s3://$b" >/dev/null 2>&1 || true
  done
  rm -rf "$work" "$www"
}
trap cleanup EXIT
export HOME=$work/home GIT_TERMINAL_PROMPT=0 DVC_NO_ANALYTICS=1
mkdir -p "$HOME" "$www"
git config --global user.name bench; git config --global user.email bench@example.org
git config --global init.defaultBranch main
git config --global annex.autocommit false
git config --global annex.security.allowed-ip-addresses 127.0.0.1  # the servers are on loopback
git lfs install --skip-repo >/dev/null

aws() { command aws --endpoint-url "$AWS_ENDPOINT_URL" "$@"; }
# rclone's S3 client fails on AWS_CA_BUNDLE ("unsupported transport"); it talks plain http here.
rclone() { env -u AWS_CA_BUNDLE rclone "$@"; }
# rclone remotes from the environment: rgw: (the S3 API) and www: (nginx over http).
export RCLONE_CONFIG_RGW_TYPE=s3 RCLONE_CONFIG_RGW_PROVIDER=Ceph \
  RCLONE_CONFIG_RGW_ENDPOINT=$AWS_ENDPOINT_URL RCLONE_CONFIG_RGW_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID \
  RCLONE_CONFIG_RGW_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
  RCLONE_CONFIG_WWW_TYPE=http RCLONE_CONFIG_WWW_URL=$web/
bucket_n=0
# A new bucket each time (nothing left from an earlier repetition helps).
new_bucket() { bucket_n=$((bucket_n + 1)); bucket=peers-$$-$1-$bucket_n; aws s3 mb "s3://$bucket" >/dev/null; }
# Deleting a bucket is housekeeping: a store that hangs on it (RGW's memstore did, on a
# bucket rclone had written 1 GiB into) costs the bucket, not the figures.
drop_bucket() {
  timeout 120 aws s3 rb --force "s3://$1" >/dev/null 2>&1 || echo "could not delete bucket $1; going on" >&2
}

now() { date +%s.%N; }
# The timings: "JOB|TOOL" -> seconds, space separated; the rows in order of first record.
declare -A T; rows=()
# Each figure also goes to standard error as it is measured, so a run cut short keeps them.
record() { [ -n "${T[$1]+x}" ] || rows+=("$1"); T[$1]+="$2 "; echo "measured: $1 $2" >&2; }
# `timed KEY CMD...`: runs CMD (its output discarded) and records its seconds under KEY.
timed() {
  local key=$1 t0; shift; t0=$(now)
  "$@" >/dev/null 2>>"$work/tools.log" || { echo "failed: $key (see below)" >&2; tail -5 "$work/tools.log" >&2; exit 1; }
  record "$key" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { printf "%.2f", a[int((NR + 1) / 2)] }'; }
spread() { tr ' ' '\n' | grep . | sort -g | awk -v s="${1:-1}" '{ a[NR] = $1 } END { printf "%.2f–%.2f", a[1] * s, a[NR] * s }'; }
# Each row of one job, with its ratio to the job's drsd row (scaled rows: KEY "×F").
report() {
  local job=$1 key tool m base scale
  base=$(echo "${T[$job|drsd]}" | median)
  for key in "${rows[@]}"; do
    [ "${key%%|*}" = "$job" ] || continue
    tool=${key#*|}; scale=1
    [ -n "${SCALE[$key]:-}" ] && scale=${SCALE[$key]}
    m=$(echo "${T[$key]}" | median)
    awk -v j="$job" -v t="$tool" -v m="$m" -v b="$base" -v s="$scale" -v sp="$(echo "${T[$key]}" | spread "$scale")" \
      'BEGIN { printf "| %s | %s | %.2f | %s | %.2f× |\n", j, t, m * s, sp, m * s / b }'
  done
}
declare -A SCALE

# A daemon with a new, empty pool and state for each measurement.
fresh_daemon() {
  [ -n "$daemon_pid" ] && { kill "$daemon_pid" 2>/dev/null; wait "$daemon_pid" 2>/dev/null || true; }
  local d; d=$work/daemon-$((++daemon_n)); mkdir -p "$d"
  export DRSD_SOCKET=$d/run/drsd.sock DRSD_POOL=$d/pool DRSD_STATE_DIR=$d/state
  drsd serve --ready > "$d/ready" 2> "$d/log" &
  daemon_pid=$!
  for _ in $(seq 200); do grep -q ready "$d/ready" 2>/dev/null && return; sleep 0.05; done
  echo "drsd did not start" >&2; exit 1
}
daemon_n=0
fresh() { rm -rf "$work/r"; mkdir -p "$work/r"; cd "$work/r"; }
git_repo() { fresh; git init -q .; }
annex_repo() { git_repo; git annex init -q bench >/dev/null 2>&1; }
dvc_repo() { git_repo; dvc init -q; }

# ---- add-url of 1 and N_ADD URLs: no content read by any tool ----
job_addurl() {
  mkdir -p "$www/add"
  for i in $(seq -f %05g 1 "$N_ADD"); do printf 'object %s\n' "$i" > "$www/add/f$i.bin"; done
  for i in $(seq -f %05g 1 "$N_ADD"); do echo "$web/add/f$i.bin data/f$i.bin"; done > "$work/add.list"
  head -n "$DVC_N" "$work/add.list" > "$work/add.dvc.list"
  dvc_batch() { while read -r url path; do dvc import-url -q --no-download "$url" "$path"; done < "$work/add.dvc.list"; }
  for _ in $(seq "$REPS"); do
    fresh_daemon; git_repo; timed "add-url 1|drsd" drsctl add-url --no-fetch "$web/add/f00001.bin" one.bin
    annex_repo; timed "add-url 1|git annex addurl --fast" git annex addurl --fast --file one.bin "$web/add/f00001.bin"
    dvc_repo; timed "add-url 1|dvc import-url --no-download" dvc import-url -q --no-download "$web/add/f00001.bin" one.bin
    fresh_daemon; git_repo; timed "add-url $N_ADD|drsd" drsctl add-url --no-fetch --from "$work/add.list"
    annex_repo; timed "add-url $N_ADD|git annex addurl --fast --batch" \
      git annex addurl --fast --batch --with-files < "$work/add.list"
    dvc_repo; mkdir -p data; timed "add-url $N_ADD|dvc import-url --no-download ($DVC_N timed, scaled)" dvc_batch
  done
  SCALE["add-url $N_ADD|dvc import-url --no-download ($DVC_N timed, scaled)"]=$(awk -v a="$N_ADD" -v b="$DVC_N" 'BEGIN { print a / b }')
  report "add-url 1"; report "add-url $N_ADD"
}

# ---- download + sha256 of one SIZE_MIB object, from RGW and from nginx ----
job_download() {
  local obj=$work/object.bin rgw_bucket
  head -c $((SIZE_MIB << 20)) /dev/urandom > "$obj"
  cp "$obj" "$www/big.bin"
  new_bucket dl; rgw_bucket=$bucket
  # Public-read, so git-annex and dvc read it over plain http; the others sign.
  aws s3 cp --quiet --acl public-read "$obj" "s3://$rgw_bucket/big.bin"
  rm -f "$obj"
  local s3=s3://$rgw_bucket/big.bin rgw_http=$AWS_ENDPOINT_URL/$rgw_bucket/big.bin nginx=$web/big.bin
  sha() { sha256sum "$1" >/dev/null; }
  curl_rgw() {
    curl -sf --aws-sigv4 "aws:amz:${AWS_REGION:-us-east-1}:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
      -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -o big.bin "$rgw_http" && sha big.bin
  }
  curl_plain() { curl -sf -o big.bin "$1" && sha big.bin; }
  rclone_sha() { rclone copy "$1" . && sha big.bin; }
  aws_sha() { aws s3 cp --quiet "$s3" big.bin && sha big.bin; }
  drsd_get() { drsctl add-url "$1" big.bin && drsctl promote --all --wait; }
  for _ in $(seq "$REPS"); do
    fresh_daemon; git_repo; timed "download RGW|drsd" drsd_get "$s3"
    fresh; timed "download RGW|curl + sha256sum" curl_rgw
    fresh; timed "download RGW|rclone copy + sha256sum" rclone_sha "rgw:$rgw_bucket/big.bin"
    fresh; timed "download RGW|aws s3 cp + sha256sum" aws_sha
    annex_repo; timed "download RGW|git annex addurl (http, public-read)" git annex addurl --file big.bin "$rgw_http"
    dvc_repo; timed "download RGW|dvc import-url (s3://)" dvc import-url -q "$s3" big.bin
    fresh_daemon; git_repo; timed "download nginx|drsd" drsd_get "$nginx"
    fresh; timed "download nginx|curl + sha256sum" curl_plain "$nginx"
    fresh; timed "download nginx|rclone copy + sha256sum" rclone_sha "www:big.bin"
    annex_repo; timed "download nginx|git annex addurl" git annex addurl --file big.bin "$nginx"
    dvc_repo; timed "download nginx|dvc import-url" dvc import-url -q "$nginx" big.bin
    fresh
  done
  drop_bucket "$rgw_bucket"; rm -f "$www/big.bin"
  report "download RGW"; report "download nginx"
}

# ---- N_SMALL x 4 KiB foreign objects: from add-url to promoted ----
job_small() {
  mkdir -p "$www/small"
  python3 - "$www/small" "$N_SMALL" <<'PY'
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], f"s{i:05}.bin"), "wb") as f:
        f.write(os.urandom(4096))
PY
  : > "$work/small.list"; : > "$work/small.curl"
  for f in "$www"/small/*.bin; do
    n=${f##*/}
    echo "$web/small/$n data/$n" >> "$work/small.list"
    printf 'url = "%s"\noutput = "data/%s"\n' "$web/small/$n" "$n" >> "$work/small.curl"
  done
  drsd_small() { drsctl add-url --from "$work/small.list" && drsctl promote --all --wait; }
  curl_small() { curl -s --fail --parallel --parallel-max 32 --create-dirs -K "$work/small.curl" && sha256sum data/* >/dev/null; }
  for _ in $(seq "$REPS"); do
    fresh_daemon; git_repo; timed "$N_SMALL × 4 KiB|drsd" drsd_small
    fresh; timed "$N_SMALL × 4 KiB|curl --parallel (32) + sha256sum" curl_small
    annex_repo; timed "$N_SMALL × 4 KiB|git annex addurl --batch" git annex addurl --batch --with-files < "$work/small.list"
  done
  report "$N_SMALL × 4 KiB"
}

# ---- push and fresh clone through Git LFS, and the same files by aws / rclone ----
giftless_up() {
  local storage
  if [ "$GIFTLESS_STORAGE" = s3 ]; then
    new_bucket giftless; giftless_bucket=$bucket
    storage="      storage_class: giftless.storage.amazon_s3:AmazonS3Storage
      storage_options: {bucket_name: $giftless_bucket, endpoint: '$AWS_ENDPOINT_URL'}"
    factory=giftless.transfer.basic_external:factory
  else
    storage="      storage_class: giftless.storage.local_storage:LocalStorage
      storage_options: {path: '$work/giftless-storage'}"
    factory=giftless.transfer.basic_streaming:factory
  fi
  cat > "$work/giftless.yaml" <<EOF
AUTH_PROVIDERS: ['giftless.auth.allow_anon:read_write']
LEGACY_ENDPOINTS: true
TRANSFER_ADAPTERS:
  basic:
    factory: $factory
    options:
$storage
      action_lifetime: 3600
EOF
  (cd "$work" && GIFTLESS_CONFIG_FILE=$work/giftless.yaml exec "$gvenv/bin/gunicorn" -w 2 --threads 8 \
    -b "127.0.0.1:$GIFTLESS_PORT" giftless.wsgi_entrypoint:app > "$work/giftless.log" 2>&1) &
  giftless_pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$GIFTLESS_PORT/" && return; sleep 0.1; done
  echo "giftless did not start" >&2; cat "$work/giftless.log" >&2; exit 1
}
lfs_set() {  # DIR small|big
  mkdir -p "$1"
  if [ "$2" = small ]; then
    python3 - "$1" "$LFS_N" <<'PY'
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], f"f{i:05}.bin"), "wb") as f:
        f.write(os.urandom(16384))
PY
  else
    head -c $((LFS_BIG_MIB << 20)) /dev/urandom > "$1/big.bin"
  fi
}
# A committed repo at r/src holding the set's files, its origin a bare repo r/remote.git.
lfs_src() {  # SET drsd|stock
  fresh; git init -q src; git init -q --bare remote.git
  if [ "$2" = stock ]; then git -C src lfs install --local >/dev/null
  else (cd src && drsctl init --remote "s3://$bucket/lfs" >/dev/null); fi
  git -C src lfs track '*.bin' >/dev/null
  cp -r "$work/set-$1/." src/
  git -C src add . && git -C src commit -qm data
  git -C src remote add origin "$work/r/remote.git"
}
job_lfs() {
  giftless_up
  local lfs_url=http://127.0.0.1:$GIFTLESS_PORT/bench/repo$$
  echo "giftless: storage $GIFTLESS_STORAGE$([ "$GIFTLESS_STORAGE" = s3 ] && echo ", bucket on the same RGW")" >&2
  for set in $LFS_SETS; do
    lfs_set "$work/set-$set" $set
    local label; label=$([ $set = small ] && echo "$LFS_N × 16 KiB" || echo "1 × $LFS_BIG_MIB MiB")
    for rep in $(seq "$REPS"); do
      # drsd: its agent pushes to a new bucket; the clone runs against a daemon with an empty pool.
      new_bucket lfs; fresh_daemon; lfs_src $set drsd
      timed "push $label|drsd" git -C src push -q origin main
      fresh_daemon; timed "clone $label|drsd" drsctl clone "$work/r/remote.git" clone-drsd
      drop_bucket "$bucket"
      # stock git-lfs to giftless (a new repo path each time).
      lfs_src $set stock; git -C src config lfs.url "$lfs_url-$set-$rep"
      timed "push $label|git-lfs + giftless" git -C src push -q origin main
      timed "clone $label|git-lfs + giftless" git clone -q -c "lfs.url=$lfs_url-$set-$rep" "$work/r/remote.git" clone-stock
      # files only, no git: up, then down into an empty folder.
      new_bucket sync
      timed "push $label|aws s3 sync (files only)" aws s3 sync --quiet "$work/set-$set" "s3://$bucket/d"
      timed "clone $label|aws s3 sync (files only)" aws s3 sync --quiet "s3://$bucket/d" "$work/r/aws-down"
      drop_bucket "$bucket"; new_bucket rclone
      timed "push $label|rclone copy (files only)" rclone copy "$work/set-$set" "rgw:$bucket/d"
      timed "clone $label|rclone copy (files only)" rclone copy "rgw:$bucket/d" "$work/r/rclone-down"
      drop_bucket "$bucket"
      [ "$GIFTLESS_STORAGE" = s3 ] && aws s3 rm --quiet --recursive "s3://$giftless_bucket"
      rm -rf "$work/giftless-storage"
    done
    rm -rf "$work/set-$set"
    report "push $label"; report "clone $label"
  done
}

echo "drsd $(drsd --version 2>/dev/null | head -1), $(git annex version --raw 2>/dev/null | sed 's/^/git-annex /'), $(dvc --version | sed 's/^/dvc /'), $(rclone version | head -1), $(aws --version 2>&1 | cut -d' ' -f1), $(git lfs version | cut -d' ' -f1), giftless $("$gvenv/bin/python" -c 'import importlib.metadata as m; print(m.version("giftless"))')" >&2
echo "work dir: $work ($(df --output=fstype "$work" | tail -1)); REPS=$REPS" >&2
echo
echo "| job | tool | median s | min–max s | / drsd |"
echo "|---|---|---|---|---|"
for job in "${jobs[@]}"; do "job_$job"; done
