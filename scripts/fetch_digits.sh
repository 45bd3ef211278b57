#!/usr/bin/env bash
# fetch_digits.sh: the scikit-learn `digits` data set (1797 handwritten digits, 8x8 pixels 0-16,
# label 0-9) for the convergence test, taken from Debian's python3-sklearn package.
#
#   scripts/fetch_digits.sh [DIR]      DIR = $BRAID_DATA_DIR, else ./build/data
#
# Leaves DIR/digits.csv.gz (checked against its sha256) and DIR/digits.csv (decompressed). When
# DIR/digits.csv.gz is already there with the right checksum nothing is downloaded. Otherwise
# `apt-get download python3-sklearn` fetches the .deb (arch all) into DIR/deb (after an
# `apt-get update` when apt does not know the package yet; that needs root), `dpkg-deb -x`
# unpacks it, and the file is copied out of
# usr/lib/python3/dist-packages/sklearn/datasets/data/. Needs apt-get, dpkg-deb, sha256sum and
# gzip (Debian/Ubuntu) and network access to a Debian mirror.
#
# Exit status: 0 with the files in place; 1 when they could not be fetched or the checksum
# differs (the message says which).
set -euo pipefail

readonly SHA256=46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a
readonly PACKAGE=python3-sklearn
readonly INNER=usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz

dir="${1:-${BRAID_DATA_DIR:-build/data}}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
gz="$dir/digits.csv.gz"
csv="$dir/digits.csv"

checksum_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA256" ]; }

finish() {
  # Decompress next to it (atomically: readers never see half a file).
  gzip -dc "$gz" >"$csv.tmp.$$" && mv -f "$csv.tmp.$$" "$csv"
  echo "fetch_digits.sh: $gz (sha256 ok), $csv ($(wc -l <"$csv") lines)"
  exit 0
}

if checksum_ok "$gz"; then
  [ -f "$csv" ] && { echo "fetch_digits.sh: $csv is present"; exit 0; }
  finish
fi

for tool in apt-get dpkg-deb sha256sum gzip; do
  command -v "$tool" >/dev/null 2>&1 || { echo "fetch_digits.sh: $tool not found (needs a Debian-like system)" >&2; exit 1; }
done

work="$dir/deb"
mkdir -p "$work"
cd "$work"
rm -f ./${PACKAGE}_*.deb
if ! apt-get download "$PACKAGE" >/dev/null 2>"$work/apt.err"; then
  echo "fetch_digits.sh: apt-get download failed ($(tail -1 "$work/apt.err")); running apt-get update" >&2
  apt-get update -qq >/dev/null 2>"$work/update.err" ||
    echo "fetch_digits.sh: apt-get update failed: $(tail -1 "$work/update.err")" >&2
  apt-get download "$PACKAGE" >/dev/null 2>"$work/apt.err" || {
    echo "fetch_digits.sh: apt-get download $PACKAGE failed: $(tail -3 "$work/apt.err")" >&2
    exit 1
  }
fi
deb="$(ls ./${PACKAGE}_*.deb | head -1)"
rm -rf "$work/x"
dpkg-deb -x "$deb" "$work/x"
[ -f "$work/x/$INNER" ] || { echo "fetch_digits.sh: $deb has no $INNER" >&2; exit 1; }
if ! checksum_ok "$work/x/$INNER"; then
  echo "fetch_digits.sh: $INNER from $deb has sha256 $(sha256sum "$work/x/$INNER" | cut -d' ' -f1)," \
       "expected $SHA256 (another package version?)" >&2
  exit 1
fi
cp "$work/x/$INNER" "$gz.tmp.$$" && mv -f "$gz.tmp.$$" "$gz"
rm -rf "$work"
finish
