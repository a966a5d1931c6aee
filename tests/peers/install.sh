#!/usr/bin/env bash
# Installs the servers the built-in connector tests run against, from Debian's packages, when missing:
# PostgreSQL, MariaDB and Dovecot (IMAP). Nothing is started here and no system service is enabled: the
# tests start their own instances on loopback in temporary directories (tests/peers/servers.py).
set -euo pipefail

missing=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
[ -x /usr/sbin/dovecot ] && [ -x /usr/lib/dovecot/imap ] || missing+=(dovecot-imapd)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "tests/peers/install.sh: need ${missing[*]} from Debian's packages; run as root (or apt-get install them)" >&2
  exit 1
fi
echo "installing ${missing[*]} from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
# Keep the packages' own services from starting: the tests start private instances.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
fi
trap '[ "$created_policy" = 1 ] && rm -f "$policy"' EXIT
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
