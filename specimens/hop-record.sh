#!/usr/bin/env bash
# Records both legs of a hop that splits whole responses (testdata/captures/
# hop_splits_whole_responses.pcap): a line server writing each reply whole with TCP_NODELAY,
# behind `tcpdoctor proxy` re-slicing replies into 40-byte writes with Nagle on towards the
# client, driven by `tcpdoctor bench`. Needs CAP_NET_RAW (root) for `tcpdoctor capture`.
# Usage: sudo specimens/hop-record.sh [OUT.pcap]   (ports are ephemeral; the .expect names
# the hop's port, so update it after re-recording)
set -euo pipefail
T=${TCPDOCTOR:-target/release/tcpdoctor}
OUT=${1:-hop_splits_whole_responses.pcap}
DIR=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$DIR"' EXIT
wait_for() { for _ in $(seq 100); do grep -qE "$2" "$1" && return 0; sleep 0.05; done; echo "timeout: $1" >&2; exit 1; }

"$T" specimen --listen 127.0.0.1:0 --protocol line --writes whole --nodelay >"$DIR/srv" 2>&1 &
wait_for "$DIR/srv" listening
SPORT=$(grep -o '127.0.0.1:[0-9]*' "$DIR/srv" | head -1 | cut -d: -f2)
"$T" proxy --listen 127.0.0.1:0 --upstream "127.0.0.1:$SPORT" --nagle client=on \
    --chunks s2c=split:40 >"$DIR/px" 2>&1 &
wait_for "$DIR/px" '→'
PPORT=$(grep -o 'proxy: 127.0.0.1:[0-9]*' "$DIR/px" | cut -d: -f3)
"$T" capture --port "$SPORT" --port "$PPORT" -s 128 -w "$OUT" --duration 6s &
CAP=$!
sleep 1 # the capture socket is open once it has printed; 1 s is ample and bounded
"$T" bench --target "127.0.0.1:$PPORT" --preset line --param request=LIST \
    --param 'until_line=^\.\r?$' --connections 1 --requests 40
wait $CAP
echo "hop listening on $PPORT, server on $SPORT; wrote $OUT"
