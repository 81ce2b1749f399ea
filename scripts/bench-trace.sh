#!/usr/bin/env bash
# Does `tcpdoctor trace` change what it measures? (issue 27, "Performance")
#
# calls:   a request/response workload (testdata/servers/pingpong.c: a client and a server in
#          one program, N round trips over loopback, 5 trapped calls each) run untraced, under
#          `tcpdoctor trace`, and under `strace -f --seccomp-bpf -e trace=<the calls of
#          crates/tcpdoctor/src/trace/filter.rs trapped()>` (the peer: the same filter technique),
#          the order rotating each round. Per round and as median [min–max]: the workload's own
#          time (pingpong times itself from the vDSO clock), the whole command's wall time, the
#          added time per traced call ((traced − untraced) / calls, calls counted by strace -c)
#          for each tracer, and the ratio tcpdoctor / strace. Goal: ratio < 1.
# latency: specimens/aio_lineserver.py (asyncio, one write per line, 4 lines) driven by
#          `tcpdoctor bench --rate $RATE` (2000) on one connection, untraced vs traced: p50 and p99.
#          Goal: traced p50 within +20 us of untraced.
# nagle:   the same server with --nagle on (the per-line Nagle server), closed loop: the ~40 ms
#          stall must show traced as untraced (p50 both ways).
#
#   scripts/bench-trace.sh                 # all three, 5 rounds, N=20000
#   ROUNDS=7 N=50000 scripts/bench-trace.sh calls
#
# Needs: cargo, cc, strace, python3. Everything listens on 127.0.0.1.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
N=${N:-20000}
RATE_S=${RATE_S:-5s}
RATE=${RATE:-2000}
WHAT=${1:-all}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
for tool in cc strace python3; do
    command -v "$tool" >/dev/null || { echo "bench-trace: $tool is needed" >&2; exit 2; }
done
cargo build --quiet --release -p tcpdoctor --bin tcpdoctor
TD=$CARGO_TARGET_DIR/release/tcpdoctor
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

# The trapped calls, by name, for this machine's architecture: what filter.rs lists.
ARCH=$(uname -m)
TRAPPED=$(awk -v arch="$ARCH" '
    /^const GENERIC/ { inside = 1 }
    $0 ~ "^#\\[cfg\\(target_arch = \"" arch "\"\\)\\]$" { cfg = 1; next }
    cfg && /^const LEGACY/ { inside = 1 }
    { cfg = 0 }
    inside { print }
    inside && /^\];/ { inside = 0 }' crates/tcpdoctor/src/trace/filter.rs |
    grep -o 'libc::SYS_[a-z0-9_]*' | sed 's/libc::SYS_//' | sort -u | paste -sd, -)
[ -n "$TRAPPED" ] || { echo "bench-trace: no trapped calls for $ARCH in filter.rs" >&2; exit 2; }

now() { python3 -c 'import time; print(time.monotonic())'; }

bench_calls() {
    cc -O2 -o "$WORK/pingpong" testdata/servers/pingpong.c
    local pp=$WORK/pingpong
    strace -f -c --seccomp-bpf -e trace="$TRAPPED" -o "$WORK/count" "$pp" "$N" >/dev/null
    local calls
    calls=$(awk '$NF == "total" { print $4 }' "$WORK/count")
    local results=$WORK/calls
    : >"$results"
    for round in $(seq "$ROUNDS"); do
        local modes
        case $((round % 3)) in
            1) modes="untraced tcpdoctor strace" ;;
            2) modes="tcpdoctor strace untraced" ;;
            0) modes="strace untraced tcpdoctor" ;;
        esac
        for mode in $modes; do
            local t0 t1 out
            t0=$(now)
            case $mode in
                untraced) out=$("$pp" "$N") ;;
                tcpdoctor) out=$("$TD" trace -o /dev/null -- "$pp" "$N") ;;
                strace) out=$(strace -f --seccomp-bpf -e trace="$TRAPPED" -o /dev/null "$pp" "$N") ;;
            esac
            t1=$(now)
            echo "$round $mode $(echo "$out" | awk '{print $(NF-1)}') $t0 $t1" >>"$results"
        done
    done
    python3 - "$results" "$calls" "$N" "$TRAPPED" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
calls, n = int(sys.argv[2]), int(sys.argv[3])
by = {}
for rnd, mode, us, t0, t1 in rows:
    by.setdefault(int(rnd), {})[mode] = (float(us), (float(t1) - float(t0)) * 1e6)
print(f"calls: pingpong {n} round trips; {calls} trapped calls (strace -c); trapped set: {sys.argv[4]}")
print("round  untraced_ms  tcpdoctor_ms  strace_ms | wall: untraced  tcpdoctor  strace (ms) | added us/call: tcpdoctor  strace  ratio")
cols = {k: [] for k in ("u", "t", "s", "wu", "wt", "ws", "at", "as", "r")}
for rnd in sorted(by):
    u, t, s = by[rnd]["untraced"], by[rnd]["tcpdoctor"], by[rnd]["strace"]
    at, as_ = (t[0] - u[0]) / calls, (s[0] - u[0]) / calls
    for k, v in zip(cols, (u[0], t[0], s[0], u[1], t[1], s[1], at, as_, at / as_)):
        cols[k].append(v)
    print(f"{rnd:5}  {u[0]/1e3:11.1f}  {t[0]/1e3:12.1f}  {s[0]/1e3:9.1f} |       {u[1]/1e3:8.1f}  {t[1]/1e3:9.1f}  {s[1]/1e3:6.1f}      |              {at:9.2f}  {as_:6.2f}  {at/as_:5.2f}")
def m(k, scale=1.0, f="{:.2f}"):
    v = [x * scale for x in cols[k]]
    return f"{f.format(statistics.median(v))} [{f.format(min(v))}–{f.format(max(v))}]"
print(f"median [min–max]: workload ms untraced {m('u', 1e-3, '{:.1f}')}, tcpdoctor {m('t', 1e-3, '{:.1f}')}, strace {m('s', 1e-3, '{:.1f}')}")
print(f"                  wall ms untraced {m('wu', 1e-3, '{:.1f}')}, tcpdoctor {m('wt', 1e-3, '{:.1f}')}, strace {m('ws', 1e-3, '{:.1f}')}")
print(f"                  added us per traced call: tcpdoctor {m('at')}, strace {m('as')}; ratio tcpdoctor/strace {m('r')}")
print("goal: ratio < 1 —", "met" if statistics.median(cols["r"]) < 1 else "NOT met")
PY
}

# serve MODE NAGLE: starts aio_lineserver (traced or not); sets SERVER_PORT and SERVER_PID.
serve() {
    local out=$WORK/server.$RANDOM
    : >"$out"
    local cmd=(python3 specimens/aio_lineserver.py --lines 4 --nagle "$2" --max-conns 1 --idle-timeout 30)
    if [ "$1" = traced ]; then
        "$TD" trace -o /dev/null -- "${cmd[@]}" >"$out" 2>/dev/null &
    else
        "${cmd[@]}" >"$out" 2>/dev/null &
    fi
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    for _ in $(seq 400); do
        grep -q '^PORT ' "$out" && break
        sleep 0.025
    done
    SERVER_PORT=$(awk '/^PORT /{print $2}' "$out")
    [ -n "$SERVER_PORT" ] || { echo "bench-trace: the server did not start" >&2; exit 1; }
}

# drive MODE NAGLE ARGS…: one bench run against a fresh server; prints "p50_ms p99_ms rps".
drive() {
    local mode=$1 nagle=$2
    shift 2
    serve "$mode" "$nagle"
    "$TD" bench --target "127.0.0.1:$SERVER_PORT" --preset line --param 'request=GET 1' \
        --param 'until_line=^\.\r?$' --connections 1 --format json "$@" 2>/dev/null |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["runs"][0]; l=r["latency_ms"]; print(l["p50"], l["p99"], r["throughput_rps"])'
    wait "$SERVER_PID" || true
}

bench_latency() {
    local label=$1 nagle=$2
    shift 2
    local results=$WORK/lat.$label
    : >"$results"
    for round in $(seq "$ROUNDS"); do
        for mode in $( ((round % 2)) && echo "untraced traced" || echo "traced untraced"); do
            echo "$round $mode $(drive "$mode" "$nagle" "$@")" >>"$results"
        done
    done
    python3 - "$results" "$label" "$*" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for rnd, mode, p50, p99, rps in rows:
    by.setdefault(int(rnd), {})[mode] = (float(p50) * 1e3, float(p99) * 1e3, float(rps))
print(f"{sys.argv[2]}: aio_lineserver (4 lines) under tcpdoctor bench {sys.argv[3]}")
print("round  p50_us untraced  traced  (+us) | p99_us untraced  traced | req/s untraced  traced")
d = []
for rnd in sorted(by):
    u, t = by[rnd]["untraced"], by[rnd]["traced"]
    d.append(t[0] - u[0])
    print(f"{rnd:5}  {u[0]:15.1f}  {t[0]:6.1f}  ({t[0]-u[0]:+.1f}) | {u[1]:14.1f}  {t[1]:6.1f} | {u[2]:14.1f}  {t[2]:6.1f}")
med = lambda mode, i: statistics.median(by[r][mode][i] for r in by)
print(f"median p50 us: untraced {med('untraced', 0):.1f}, traced {med('traced', 0):.1f}; added {statistics.median(d):+.1f} [{min(d):+.1f} – {max(d):+.1f}]")
PY
}

case $WHAT in
    calls) bench_calls ;;
    latency) bench_latency latency off --rate "$RATE" --duration "$RATE_S" ;;
    nagle) bench_latency nagle on --requests 100 ;;
    all)
        bench_calls
        echo
        bench_latency latency off --rate "$RATE" --duration "$RATE_S"
        echo
        bench_latency nagle on --requests 100
        ;;
    *) echo "usage: $0 [calls|latency|nagle|all]" >&2; exit 2 ;;
esac
