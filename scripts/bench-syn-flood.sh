#!/usr/bin/env bash
# bench-syn-flood.sh — what a SYN flood costs `tcpdoctor analyze` (issue 29, "bounded under
# attack").
#
# What it measures: wall time and peak RSS (`/usr/bin/time -f '%e %M'`) of
#     tcpdoctor analyze --format json F > /dev/null
# on two captures written by scripts/gen-syn-flood.py (COUNT attempts, default 500,000, from
# distinct sources, one SYN each, 2 µs apart, to one server; 41 MB and 82 MB at 500,000):
#   syn      — SYNs only (a flood the server drops or the capture sees one way);
#   answered — each SYN answered by a SYN-ACK that is never ACKed (a server answering with
#              SYN cookies);
#   syn-retried, answered-retried — RETRIED attempts (default 60,000), each SYN sent three
#              times with its ISN at the kernel's retry spacing (0, 1, 3 s), answered each time
#              in the second (`--retries`). Fewer attempts than the cap, so that the retries
#              find their attempts still kept (a bigger flood's retries, 1 s later, find them
#              evicted and start attempts of their own): a retry must keep its attempt
#              half-open, not make it a full flow.
# It prints bytes of peak RSS per attempt and the `half_open_untracked` count the report gives
# (attempts beyond the cap of 65,536 kept at once). With BASE=/path/to/older/tcpdoctor the same
# runs are made with that binary too, side by side. Exits 0 whatever the figures.
#
# Run:
#     cargo build --release -p tcpdoctor
#     scripts/bench-syn-flood.sh [COUNT]
#     BASE=/tmp/main/target/release/tcpdoctor scripts/bench-syn-flood.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

COUNT=${1:-500000}
RETRIED=${RETRIED:-60000}
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/tcpdoctor}
[ -x "$BIN" ] || { echo "no release binary at $BIN (cargo build --release -p tcpdoctor)" >&2; exit 2; }

python3 scripts/gen-syn-flood.py "$WORK/syn.pcap" "$COUNT"
python3 scripts/gen-syn-flood.py "$WORK/answered.pcap" "$COUNT" --answered
python3 scripts/gen-syn-flood.py "$WORK/syn-retried.pcap" "$RETRIED" --retries
python3 scripts/gen-syn-flood.py "$WORK/answered-retried.pcap" "$RETRIED" --answered --retries

run() { # label binary capture attempts
    local out="$WORK/out.json" t n=$4
    t=$( { /usr/bin/time -f '%e %M' "$2" analyze --format json "$3" > "$out"; } 2>&1 | tail -1)
    local secs=${t% *} kb=${t#* }
    local untracked
    untracked=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["captures"][0]; print(c.get("half_open_untracked", 0))' "$out")
    printf '%-8s %-16s %9s attempts  %6.2f s  peak RSS %7.1f MB  %6.0f B/attempt  untracked %s\n' \
        "$1" "$(basename "$3" .pcap)" "$n" "$secs" "$(echo "$kb / 1024" | bc -l)" \
        "$(echo "$kb * 1024 / $n" | bc -l)" "$untracked"
}

for f in "$WORK"/{syn,answered,syn-retried,answered-retried}.pcap; do
    cat "$f" > /dev/null
    case $f in *retried*) n=$RETRIED ;; *) n=$COUNT ;; esac
    if [ -n "${BASE:-}" ]; then run base "$BASE" "$f" "$n"; fi
    run this "$BIN" "$f" "$n"
done
