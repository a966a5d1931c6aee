#!/bin/sh
# initdb into $PGDATA on the first start (user postgres, password $POSTGRES_PASSWORD, scram from anywhere on
# the pod network), then run the server in the foreground; a later start finds the data and just runs it.
set -eu
BIN=/usr/lib/postgresql/15/bin
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pw="$(mktemp)"
    printf '%s' "$POSTGRES_PASSWORD" >"$pw"
    "$BIN/initdb" -D "$PGDATA" -U postgres --auth=scram-sha-256 --pwfile="$pw" --encoding=UTF8 >/dev/null
    rm -f "$pw"
    echo "host all all 0.0.0.0/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
fi
exec "$BIN/postgres" -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp
