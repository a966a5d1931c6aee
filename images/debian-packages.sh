#!/usr/bin/env bash
# Install Debian packages this machine lacks, with apt-get (root) or through sudo; a no-op when all are there.
#
#   images/debian-packages.sh buildah runc debootstrap
#
# Used by images/build.sh (image builds without Docker) and tests/cluster/build_bins.sh (the real node).
set -euo pipefail

missing=()
for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$pkg")
done
((${#missing[@]})) || exit 0

SUDO=()
if ((EUID != 0)); then
    command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    SUDO=(sudo)
fi
# Serialise with other installs started by these scripts (a parallel make, two sessions).
exec 8>/tmp/agent-engine-apt.lock
flock 8
printf '[debian-packages] apt-get install %s\n' "${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
"${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2
