#!/usr/bin/env bash
# Side-by-side benchmark of `tcpdoctor capture` against `tcpdump -s 256`, on the same
# loopback load: packets each one captured, packets the kernel dropped for it (its ring or
# buffer was full), and the CPU time it used (user + system, from /proc/PID/stat).
#
#   sudo scripts/bench-capture.sh                  # 5 s of flood per run, 2 rounds
#   LOAD_SECONDS=10 ROUNDS=3 SIZE=64 FLOWS=2 sudo scripts/bench-capture.sh
#
# The load is `exchange flood` (crates/tcpdoctor/examples/exchange.rs): FLOWS TCP connections
# on 127.0.0.1 writing SIZE-byte chunks with TCP_NODELAY, one segment per write, as fast as
# the CPUs allow (≈ 200–400k packets/s on an idle 2-core machine), into `exchange sink`. Each
# capture runs alone on the same flood, one after the other, in alternating order. A busy
# machine floods at different rates from run to run, so each row has its own load: the
# flood's packets per second (captured + dropped), and everything loopback carried
# meanwhile (/proc/net/dev, other programs' traffic included).
# Rows: tcpdump with its default 2 MiB buffer; tcpdoctor with its default 32 MiB ring, and
# with a 2 MiB ring (the same memory as tcpdump). Needs root and tcpdump.
set -euo pipefail

LOAD_SECONDS=${LOAD_SECONDS:-5}
ROUNDS=${ROUNDS:-2}
SIZE=${SIZE:-64}
FLOWS=${FLOWS:-2}
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench-capture.sh: run as root (both tools capture)" >&2; exit 2; }
command -v tcpdump >/dev/null || { echo "bench-capture.sh: needs tcpdump" >&2; exit 2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --quiet --release -p tcpdoctor --bin tcpdoctor --example exchange
TD=$CARGO_TARGET_DIR/release/tcpdoctor
EX=$CARGO_TARGET_DIR/release/examples/exchange
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
TICK=$(getconf CLK_TCK)

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$EX" sink "127.0.0.1:$PORT" >"$WORK/sink.out" &
PIDS+=($!)
for _ in $(seq 100); do grep -q ready "$WORK/sink.out" && break; sleep 0.05; done

lo_packets() { awk '$1 == "lo:" {print $3}' /proc/net/dev; }

# run NAME READY-TEXT COMMAND...: captures one flood; prints a result row.
run() {
    local name=$1 ready=$2
    shift 2
    local err="$WORK/$name.err"
    "$@" 2>"$err" &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 200); do grep -q "$ready" "$err" && break; sleep 0.05; done
    grep -q "$ready" "$err" || { cat "$err" >&2; exit 1; }
    local before after ticks
    before=$(lo_packets)
    local floods=()
    for _ in $(seq "$FLOWS"); do
        "$EX" flood "127.0.0.1:$PORT" "$LOAD_SECONDS" "$SIZE" >/dev/null &
        floods+=($!)
    done
    wait "${floods[@]}"
    after=$(lo_packets)
    ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    kill -INT "$pid"
    wait "$pid" || true
    local captured dropped
    case $name in
    tcpdump)
        captured=$(awk '/packets captured/ {print $1}' "$err")
        dropped=$(awk '/packets dropped by kernel/ {print $1}' "$err")
        ;;
    *)
        captured=$(sed -n 's/.* \([0-9]*\) packets captured.*/\1/p' "$err")
        dropped=$(sed -n 's/.*captured, \([0-9]*\) dropped.*/\1/p' "$err")
        ;;
    esac
    awk -v n="$name" -v lo=$((after - before)) -v s="$LOAD_SECONDS" -v c="$captured" \
        -v d="$dropped" -v t="$ticks" -v hz="$TICK" 'BEGIN {
        cpu = t / hz
        printf "%-16s %10.0f %10.0f %10d %9d %7.2f %7.2f %11.2f\n", n, (c + d) / s, lo / s, c, d,
            100 * d / (c + d), cpu, (c > 0 ? 1e6 * cpu / c : 0)
    }'
    rm -f "$WORK"/*.pcap
}

printf "load: exchange flood, %s connections, %s-byte writes, %s s per run, port %s; %s\n" \
    "$FLOWS" "$SIZE" "$LOAD_SECONDS" "$PORT" "$(nproc) cores"
printf "%-16s %10s %10s %10s %9s %7s %7s %11s\n" tool "flood pps" "lo pps" captured dropped \
    "drop %" "cpu s" "cpu s/Mpkt"
for round in $(seq "$ROUNDS"); do
    order=(tcpdump tcpdoctor tcpdoctor-2MiB)
    if [ $((round % 2)) = 0 ]; then order=(tcpdoctor-2MiB tcpdoctor tcpdump); fi
    for tool in "${order[@]}"; do
        case $tool in
        tcpdump) run tcpdump "listening on" tcpdump -i lo -s 256 -Z root \
            -w "$WORK/tcpdump.pcap" "tcp port $PORT" ;;
        tcpdoctor) run tcpdoctor "capturing on" "$TD" capture -i lo --port "$PORT" \
            --snaplen 256 -w "$WORK/tcpdoctor.pcap" ;;
        tcpdoctor-2MiB) run tcpdoctor-2MiB "capturing on" "$TD" capture -i lo --port "$PORT" \
            --snaplen 256 --buffer 2MiB -w "$WORK/tcpdoctor2.pcap" ;;
        esac
    done
done
