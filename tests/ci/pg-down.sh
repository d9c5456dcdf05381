#!/usr/bin/env bash
# Stops the server pg-up.sh DIR started (fast shutdown: sessions are ended).
set -uo pipefail
C=${1:?usage: pg-down.sh DIR}
[ -f "$C/data/postmaster.pid" ] || exit 0
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
as=()
if [ "$(id -u)" = 0 ]; then as=(runuser -u "$(stat -c %U "$C/data")" --); fi
"${as[@]}" "$bin/pg_ctl" --pgdata="$C/data" --mode=fast --wait --timeout=30 stop >/dev/null 2>&1 \
  || kill -9 "$(head -1 "$C/data/postmaster.pid")" 2>/dev/null
exit 0
