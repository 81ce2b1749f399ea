#!/usr/bin/env bash
# analyze-diff.sh — do two tcpdoctor builds say the same about every capture?
#
#     scripts/analyze-diff.sh OLD_BIN NEW_BIN [DIR...]      (default DIR: testdata/captures)
#
# Runs `BIN analyze --format json FILE` with each binary over every file under DIR (recursively),
# and compares stdout byte for byte and the exit status. Prints one line per file that differs
# (with the first lines of the diff) and a count; exits 1 if any differs, 0 if none.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"
[ $# -ge 2 ] || { sed -n '2,9s/^# \{0,1\}//p' "$0"; exit 2; }
OLD=$1 NEW=$2; shift 2
[ -x "$OLD" ] || { echo "analyze-diff: $OLD is not an executable" >&2; exit 2; }
[ -x "$NEW" ] || { echo "analyze-diff: $NEW is not an executable" >&2; exit 2; }
[ $# -gt 0 ] || set -- "$REPO/testdata/captures"
n=0 differ=0
while IFS= read -r -d '' f; do
    n=$((n + 1))
    rc_old=0 rc_new=0
    "$OLD" analyze --format json "$f" >"$WORK/old.json" 2>"$WORK/old.err" || rc_old=$?
    "$NEW" analyze --format json "$f" >"$WORK/new.json" 2>"$WORK/new.err" || rc_new=$?
    if [ "$rc_old" != "$rc_new" ] || ! cmp -s "$WORK/old.json" "$WORK/new.json"; then
        differ=$((differ + 1))
        echo "DIFFERS: $f (exit $rc_old -> $rc_new)"
        diff "$WORK/old.json" "$WORK/new.json" | head -n 10 || true
    fi
done < <(find "$@" -type f -print0 | sort -z)
echo "$n files, $differ differ"
[ "$differ" = 0 ]
