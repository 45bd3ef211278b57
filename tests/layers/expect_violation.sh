#!/usr/bin/env bash
# expect_violation.sh PYTHON CHECKER ROOT FILE AS EXPECTED: runs the layer check with FILE added as
# if it lived at AS, and passes only when the check exits 1 and reports EXPECTED.
set -uo pipefail
out=$("$1" "$2" "$3" --extra "$4:$5")
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || { echo "FAIL: the check exited $rc, want 1"; exit 1; }
grep -qF "$6" <<<"$out" || { echo "FAIL: the check did not report: $6"; exit 1; }
echo "ok: the upward include was caught"
