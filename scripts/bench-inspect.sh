#!/usr/bin/env bash
# Does `tcpdoctor inspect` disturb what it measures? redis-server under redis-benchmark (GET,
# 50 connections), with and without `inspect --pid <redis>` sampling it at the default
# interval, rounds interleaved (the order alternates each round). Reports each round's
# requests/s both ways, the median of the per-round ratios (with / without) with its min-max
# spread, and inspect's own CPU as a share of one core (its schedstat over its wall time).
# Goals (issue #15): ratio >= 0.98, inspect's CPU < 5% of a core.
#
#   scripts/bench-inspect.sh                      # 5 rounds of 300,000 GETs each way
#   ROUNDS=7 N=500000 INTERVAL=10ms scripts/bench-inspect.sh   # a shorter interval than the default
#
# Needs: cargo, python3, redis-server, redis-benchmark. Everything listens on 127.0.0.1.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
N=${N:-300000}
INTERVAL=${INTERVAL:-20ms}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
for tool in redis-server redis-benchmark python3; do
    command -v "$tool" >/dev/null || { echo "bench-inspect: $tool is needed" >&2; exit 2; }
done
cargo build --quiet --release -p tcpdoctor --bin tcpdoctor
TD=$CARGO_TARGET_DIR/release/tcpdoctor
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

REDIS=$(free_port)
redis-server --port "$REDIS" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
REDIS_PID=$!
PIDS+=("$REDIS_PID")
for _ in $(seq 200); do
    if [ "$(redis-cli -p "$REDIS" ping 2>/dev/null || true)" = PONG ]; then break; fi
    sleep 0.05
done
[ "$(redis-cli -p "$REDIS" ping 2>/dev/null || true)" = PONG ] || { echo "redis-server did not start" >&2; exit 1; }

# rps: one redis-benchmark run, its GET requests/s.
rps() {
    redis-benchmark -p "$REDIS" -t get -n "$N" -c 50 --csv 2>/dev/null |
        python3 -c 'import csv,sys; print([r for r in csv.reader(sys.stdin) if r and r[0]=="GET"][0][1])'
}

RESULTS=$WORK/results
: >"$RESULTS"
for round in $(seq "$ROUNDS"); do
    for mode in $( ((round % 2)) && echo "without with" || echo "with without"); do
        if [ "$mode" = without ]; then
            echo "$round without $(rps) 0" >>"$RESULTS"
            continue
        fi
        fifo=$WORK/ready.$round; mkfifo "$fifo"
        "$TD" inspect --pid "$REDIS_PID" --duration 10m --interval "$INTERVAL" --format json \
            >/dev/null 2>"$fifo" &
        ipid=$!
        # Its first sample is taken when it says "sampling".
        read -r -t 10 _ <"$fifo"
        cat "$fifo" >/dev/null &
        t0=$(date +%s.%N)
        r=$(rps)
        t1=$(date +%s.%N)
        cpu_ns=$(cut -d' ' -f1 "/proc/$ipid/schedstat")
        kill -INT "$ipid"; wait "$ipid" || true
        echo "$round with $r $(python3 -c "print(f'{$cpu_ns / 1e9 / ($t1 - $t0) * 100:.2f}')")" >>"$RESULTS"
    done
done

python3 - "$RESULTS" "$INTERVAL" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for rnd, mode, rps, cpu in rows:
    by.setdefault(int(rnd), {})[mode] = (float(rps), float(cpu))
print(f"redis GET, 50 connections; inspect every {sys.argv[2]}")
print("round  without_rps   with_rps   ratio  inspect_cpu_%_of_a_core")
ratios, cpus = [], []
for rnd in sorted(by):
    w, wo = by[rnd]["with"], by[rnd]["without"]
    ratios.append(w[0] / wo[0]); cpus.append(w[1])
    print(f"{rnd:5}  {wo[0]:11.0f}  {w[0]:9.0f}  {ratios[-1]:6.3f}  {w[1]:6.2f}")
print(f"median ratio {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); "
      f"inspect CPU median {statistics.median(cpus):.2f}% of a core (max {max(cpus):.2f}%)")
PY
