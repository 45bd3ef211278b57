#!/usr/bin/env bash
# Installs, from Debian, those of the named packages that are not installed yet (sudo when not
# root); says so under the caller's name. Used by setup.sh and fuzz.sh.
#   scripts/apt_install_missing.sh CALLER PACKAGE...
set -euo pipefail
caller="$1"
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "$caller: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
