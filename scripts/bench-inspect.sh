#!/usr/bin/env bash
# bench-inspect.sh — what `tcpdoctor inspect` costs the process it watches, in one run.
#
# A redis-server on a free port of 127.0.0.1 is loaded by redis-benchmark (PING, 50
# connections, ~50k req/s or whatever this machine gives) in ROUNDS interleaved pairs: one
# load alone, one with `tcpdoctor inspect --pid REDIS` sampling it at its default interval for
# the whole load (the order alternates by round). Reported:
#   - redis-benchmark's req/s with and without inspect, the median of the per-round ratios
#     (with / without) and their min-max spread;
#   - inspect's own CPU (user + system of the child, getrusage) over its wall time, as a share
#     of one core, median over the rounds;
#   - how many sockets and samples inspect read (from its JSON), so a reader can see it
#     watched the 50 connections and was not idle.
# Goals, printed PASS/MISS: throughput cost < 2% (median ratio >= 0.98), inspect's CPU < 5% of
# one core. Exit 0 whatever the figures; non-zero only if a step failed.
#
#   scripts/bench-inspect.sh                  # 5 rounds, ~1 min
#   ROUNDS=9 N=400000 scripts/bench-inspect.sh
#   INSPECT_ARGS="--interval 5ms" scripts/bench-inspect.sh
#
# Needs: cargo, python3, redis-server, redis-benchmark, redis-cli. On a shared machine the
# per-round ratio moves by several percent: run it on a quiet one (check `uptime`).
set -euo pipefail

ROUNDS=${ROUNDS:-5}
N=${N:-300000}
CONNS=${CONNS:-50}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
for tool in redis-server redis-benchmark redis-cli python3; do
    command -v "$tool" >/dev/null || { echo "bench-inspect: $tool is needed" >&2; exit 2; }
done
cargo build --quiet --release -p tcpdoctor --bin tcpdoctor
TD=$CARGO_TARGET_DIR/release/tcpdoctor
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

PORT=$(free_port)
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
PIDS+=($!)
REDIS_PID=$!
for _ in $(seq 200); do
    if [ "$(redis-cli -p "$PORT" ping 2>/dev/null || true)" = PONG ]; then break; fi
    sleep 0.05
done
[ "$(redis-cli -p "$PORT" ping 2>/dev/null || true)" = PONG ] || { echo "redis-server did not start" >&2; exit 1; }

RESULTS=$WORK/results
: >"$RESULTS"

# load: prints redis-benchmark's PING_MBULK req/s.
load() {
    redis-benchmark -p "$PORT" -t ping_mbulk -n "$N" -c "$CONNS" --csv |
        python3 -c 'import csv,sys; print([r for r in csv.reader(sys.stdin) if r and r[0]=="PING_MBULK"][0][1])'
}

# with_inspect: the load with inspect sampling redis for (about) its whole length; prints
# "RPS CPU_SHARE SOCKETS SAMPLES".
with_inspect() {
    local secs=$1
    # shellcheck disable=SC2086
    python3 - "$TD" "$REDIS_PID" "$secs" "$WORK/inspect.json" ${INSPECT_ARGS:-} <<'EOF' &
import os, resource, subprocess, sys, time
td, pid, secs, out = sys.argv[1:5]
t = time.monotonic()
with open(out, "w") as f:
    subprocess.run([td, "inspect", "--pid", pid, "--duration", f"{secs}s", "--format", "json",
                    *sys.argv[5:]], stdout=f, check=True)
wall = time.monotonic() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
open(out + ".cpu", "w").write(f"{(ru.ru_utime + ru.ru_stime) / wall:.5f}\n")
EOF
    local ipid=$!
    local rps
    rps=$(load)
    wait "$ipid"
    python3 - "$WORK/inspect.json" "$rps" "$(cat "$WORK/inspect.json.cpu")" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
procs = r["observation"]["processes"]
socks = sum(len(p["sockets"]) for p in procs)
samples = max((len(s["samples"]) for p in procs for s in p["sockets"]), default=0)
print(sys.argv[2], sys.argv[3], socks, samples)
EOF
}

# The load's length, to size inspect's --duration to it: one unmeasured run.
t0=$(date +%s.%N)
load >/dev/null
secs=$(python3 -c "print(max(1, round($(date +%s.%N) - $t0)))")
echo "one load of $N requests takes ~${secs}s; inspect samples for that long" >&2

for round in $(seq "$ROUNDS"); do
    echo "round $round/$ROUNDS" >&2
    if [ $((round % 2)) = 1 ]; then
        echo "without $(load)" >>"$RESULTS"
        echo "with $(with_inspect "$secs")" >>"$RESULTS"
    else
        echo "with $(with_inspect "$secs")" >>"$RESULTS"
        echo "without $(load)" >>"$RESULTS"
    fi
done

python3 - "$RESULTS" <<'EOF'
import statistics, sys
without, with_, cpu, socks, samples = [], [], [], [], []
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "without":
        without.append(float(f[1]))
    else:
        with_.append(float(f[1])); cpu.append(float(f[2])); socks.append(int(f[3])); samples.append(int(f[4]))
ratios = [w / wo for w, wo in zip(with_, without)]
r = statistics.median(ratios)
c = statistics.median(cpu)
print(f"redis PING, {len(ratios)} interleaved rounds")
print(f"  without inspect  {statistics.median(without):>10.0f} req/s (median)")
print(f"  with inspect     {statistics.median(with_):>10.0f} req/s (median)")
print(f"  ratio with/without  {r:.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})  "
      f"goal >= 0.98: {'PASS' if r >= 0.98 else 'MISS'}")
print(f"  inspect's own CPU   {100 * c:.2f}% of one core (median; max {100 * max(cpu):.2f}%)  "
      f"goal < 5%: {'PASS' if c < 0.05 else 'MISS'}")
print(f"  inspect read {min(socks)}-{max(socks)} sockets, up to {max(samples)} samples per socket")
EOF
