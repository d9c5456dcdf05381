#!/usr/bin/env bash
# A throwaway PostgreSQL server (Debian's `postgresql` package) for the tests:
# initdb in DIR, one server on 127.0.0.1:PORT and a unix socket in DIR/sock,
# fsync on (what a lab's server does), trust authentication on loopback only
# (but for the role drsd_password_test, which must give its password).
# Starts in a few seconds.
#   usage: pg-up.sh DIR [PORT]      stop: pg-down.sh DIR
# Writes DIR/env with DRSD_TEST_PG_URL, a libpq connection URL of a superuser
# (tests create their own database each, so they can run in parallel).
# PostgreSQL refuses to run as root: run by root, the server runs as the
# `postgres` user (made by the package), else as `nobody`.
set -euo pipefail
C=$(realpath -m "${1:?usage: pg-up.sh DIR [PORT]}"); PORT=${2:-15432}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/initdb" ] || { echo "pg-up.sh: no PostgreSQL server installed (tests/ci/install-system-deps.sh installs it)" >&2; exit 1; }
rm -rf "$C"; mkdir -p "$C/sock"
as=()
if [ "$(id -u)" = 0 ]; then
  user=postgres; id "$user" >/dev/null 2>&1 || user=nobody
  chown -R "$user" "$C"
  as=(runuser -u "$user" --)
  # Its parents must let that user through (a 0700 temp folder of root's does not).
  "${as[@]}" test -w "$C" || { echo "pg-up.sh: $user cannot write $C: make its parent folders searchable (chmod o+x)" >&2; exit 1; }
fi
"${as[@]}" "$bin/initdb" --pgdata="$C/data" --username=postgres --auth=trust \
  --encoding=UTF8 --locale=C.UTF-8 --no-sync >"$C/initdb.log" 2>&1 \
  || { cat "$C/initdb.log" >&2; exit 1; }
# One role must give its password (scram), so that the tests can show a
# password read from ~/.pgpass or a service file really is sent; the first
# matching line wins, so it goes above initdb's trust lines.
{ echo "host all drsd_password_test 127.0.0.1/32 scram-sha-256"; cat "$C/data/pg_hba.conf"; } > "$C/data/pg_hba.new"
mv "$C/data/pg_hba.new" "$C/data/pg_hba.conf"
[ "$(id -u)" = 0 ] && chown "$user" "$C/data/pg_hba.conf"
cat >> "$C/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$C/sock'
unix_socket_permissions = 0700
fsync = on
synchronous_commit = on
max_connections = 300
shared_buffers = 256MB
# Large objects of 1 GiB go through the WAL: fewer checkpoints while they do.
max_wal_size = 4GB
logging_collector = off
CONF
"${as[@]}" "$bin/pg_ctl" --pgdata="$C/data" --log="$C/server.log" --wait --timeout=60 start >/dev/null \
  || { cat "$C/server.log" >&2; exit 1; }
echo "DRSD_TEST_PG_URL=postgresql://postgres@127.0.0.1:$PORT/postgres" > "$C/env"
