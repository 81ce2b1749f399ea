#!/usr/bin/env bash
# What does `tcpdoctor watch` cost on a host with many sockets? A python3 process opens PAIRS
# loopback connections to itself (2 × PAIRS sockets, plus its listener), then `tcpdoctor watch`
# samples the host every INTERVAL for DURATION. Reports, from the exporter's own metrics and
# /proc: the CPU of one sample (tcpdoctor_watch_sample_cpu_seconds, the median over the run's
# scrapes, and the first sample, which places every socket), the exporter's CPU as a share of
# one core over the run (utime + stime from /proc/PID/stat over wall time), its peak RSS
# (VmHWM), and as the peer reading the same sockets, the wall and CPU time of one
# `ss -tin` (its tcp_info for every socket, no process names; with `-p`, names as well).
# Goals (issue #31): one sample <= 50 ms of CPU at 10,000 sockets, <= 2% of a core at a 5 s
# interval, <= 64 MB RSS.
#
# With NAGLE=1, a per-line server with Nagle on (testdata/servers/asyncio_lines.py) answers a
# client in a loop for the whole run: every interval then has a candidate connection, whose
# options are read and which is sampled fast between host samples (the finding kinds' cost,
# at most 0.5% of a core by design, on top of the host samples').
#
#   scripts/bench-watch.sh                          # 5,000 pairs (10,000 sockets), 5 s, 60 s
#   NAGLE=1 scripts/bench-watch.sh                  # the same, with a stalling server busy
#   PAIRS=20000 INTERVAL=1s DURATION=20 scripts/bench-watch.sh
#
# Needs: cargo, python3, ss (iproute2), curl. Everything is on 127.0.0.1; the script raises
# its own open-file limit (ulimit -n) to hold the sockets.
set -euo pipefail

PAIRS=${PAIRS:-5000}
INTERVAL=${INTERVAL:-5s}
DURATION=${DURATION:-60}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
for tool in python3 ss curl; do
    command -v "$tool" >/dev/null || { echo "bench-watch: $tool is needed" >&2; exit 2; }
done
ulimit -n $((PAIRS * 2 + 1024))
cargo build --quiet --release -p tcpdoctor --bin tcpdoctor
TD=$CARGO_TARGET_DIR/release/tcpdoctor
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

WORK=$(mktemp -d /tmp/tcpdoctor-bench-watch.XXXXXX)
PIDS=()
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

python3 - "$PAIRS" >"$WORK/holder.out" <<'PY' &
import socket, sys, time
n = int(sys.argv[1])
l = socket.create_server(("127.0.0.1", 0), backlog=4096)
port = l.getsockname()[1]
keep = []
for i in range(n):
    c = socket.create_connection(("127.0.0.1", port))
    s, _ = l.accept()
    keep += [c, s]
print(port, flush=True)
time.sleep(3600)
PY
PIDS+=($!)
for _ in $(seq 600); do [ -s "$WORK/holder.out" ] && break; sleep 0.1; done
[ -s "$WORK/holder.out" ] || { echo "bench-watch: the socket holder did not start" >&2; exit 1; }
SOCKETS=$(ss -tan | tail -n +2 | wc -l)
echo "sockets in this namespace: $SOCKETS ($PAIRS pairs held by one python3)"

if [ "${NAGLE:-0}" = 1 ]; then
    NPORT=$(free_port)
    python3 testdata/servers/asyncio_lines.py "$NPORT" per-line >/dev/null &
    PIDS+=($!)
    wait_port "$NPORT"
    python3 - "$NPORT" <<'PY' &
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
while True:
    s.sendall(b"q\n"); got = b""
    while not got.endswith(b".\r\n"):
        got += s.recv(4096)
PY
    PIDS+=($!)
    echo "a per-line Nagle-on server on port $NPORT answers a client in a loop"
fi

PORT=$(free_port)
"$TD" watch --listen "127.0.0.1:$PORT" --interval "$INTERVAL" 2>"$WORK/watch.err" &
WPID=$!
PIDS+=("$WPID")
wait_port "$PORT"
HZ=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
T0=$(date +%s.%N); C0=$(cpu_ticks "$WPID")
: >"$WORK/samples"
END=$((SECONDS + DURATION))
while [ $SECONDS -lt $END ]; do
    curl -s "http://127.0.0.1:$PORT/metrics" | awk '/^tcpdoctor_watch_sample_cpu_seconds /{print $2}' >>"$WORK/samples"
    sleep 1
done
T1=$(date +%s.%N); C1=$(cpu_ticks "$WPID")
RSS_KB=$(awk '/VmHWM/{print $2}' "/proc/$WPID/status")
FIRST=$(head -n 1 "$WORK/samples")
MEDIAN=$(sort -g "$WORK/samples" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
METRICS=$(curl -s "http://127.0.0.1:$PORT/metrics")
SERIES=$(awk '/^tcpdoctor_watch_series /{print $2}' <<<"$METRICS")
BURST=$(awk '/^tcpdoctor_watch_burst_samples_total /{print $2}' <<<"$METRICS")
BURST_CPU=$(awk '/^tcpdoctor_watch_burst_cpu_seconds /{print $2}' <<<"$METRICS")
grep '^tcpdoctor_finding_' <<<"$METRICS" || true

# The peer: ss reading the same sockets' tcp_info.
ss_time() { /usr/bin/time -f '%e %U %S' "$@" >/dev/null 2>"$WORK/ss.time"; tail -n 1 "$WORK/ss.time"; }
read -r SSW SSU SSS < <(ss_time ss -tin)
read -r SSPW SSPU SSPS < <(ss_time ss -tinp)

awk -v hz="$HZ" -v c0="$C0" -v c1="$C1" -v t0="$T0" -v t1="$T1" -v rss="$RSS_KB" \
    -v first="$FIRST" -v med="$MEDIAN" -v series="$SERIES" -v sockets="$SOCKETS" \
    -v ssw="$SSW" -v ssu="$SSU" -v sss="$SSS" -v sspw="$SSPW" -v sspu="$SSPU" -v ssps="$SSPS" \
    -v interval="$INTERVAL" -v burst="$BURST" -v burst_cpu="$BURST_CPU" 'BEGIN {
  share = (c1 - c0) / hz / (t1 - t0) * 100
  printf "\n%-44s %s\n", "sockets", sockets
  printf "%-44s %.1f ms CPU\n", "one sample (median of the scrapes)", med * 1000
  printf "%-44s %.1f ms CPU\n", "the first sample (places every socket)", first * 1000
  printf "%-44s %.2f%% of a core (interval %s)\n", "exporter over the run", share, interval
  printf "%-44s %.1f MB\n", "exporter peak RSS", rss / 1024
  printf "%-44s %s\n", "series exported", series
  printf "%-44s %s (the last interval, %.1f ms CPU)\n", "fast samples (finding kinds)", burst, burst_cpu * 1000
  printf "%-44s %.0f ms wall, %.0f ms CPU\n", "peer: ss -tin (tcp_info, no names)", ssw * 1000, (ssu + sss) * 1000
  printf "%-44s %.0f ms wall, %.0f ms CPU\n", "peer: ss -tinp (with process names)", sspw * 1000, (sspu + ssps) * 1000
  print "\ngoals:"
  printf "  %-4s one sample <= 50 ms CPU at this many sockets (%.1f ms)\n", (med * 1000 <= 50 ? "PASS" : "MISS"), med * 1000
  printf "  %-4s <= 2%% of a core at a 5 s interval (%.2f%% at %s)\n", (share <= 2 ? "PASS" : "MISS"), share, interval
  printf "  %-4s peak RSS <= 64 MB (%.1f MB)\n", (rss / 1024 <= 64 ? "PASS" : "MISS"), rss / 1024
}'
