#!/usr/bin/env bash
# Installs the browser tier's browser from Debian's packages when missing: Chromium (/usr/bin/chromium),
# driven by Playwright for Python (a pinned dev dependency) through its executable_path; Playwright's own
# browser downloads are never used (`playwright install` is not run).
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "tests/browser/install.sh: need chromium from Debian's packages; run as root (or apt-get install chromium)" >&2
  exit 1
fi
echo "installing chromium from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
