#!/usr/bin/env bash
# bench-analyze-conns.sh — does `tcpdoctor analyze` cost the same per connection whatever the
# number of connections open at once? Against tshark.
#
# For each N (default 20000, 100000, 400000) it writes a capture of N concurrent connections with
# crates/tcpdoctor-core/examples/concurrent_conns.rs: each connection a handshake, one 64-byte
# request, one 200-byte response and a close (8 packets), every one open before the first
# closes, each from its own client address (10.x.y.z) to one server (172.16.0.1:9000), so every
# per-flow and per-client table holds N entries at the peak. Then it times, in the same run, page
# cache warmed first, each under `/usr/bin/time` (its %M: peak RSS) and timed by the shell's
# microsecond clock (%e's 10 ms steps were a fifth of the 20000 case):
#     tcpdoctor analyze --format json F > report     (the median of --runs runs)
#     tshark -q -z conv,tcp -r F > conv              (1 run)
# and prints one table: time per connection (µs), peak RSS per open connection (KB = 10^3
# bytes, the whole process's peak divided by N), and tshark's time over tcpdoctor's. It
# cross-checks the flows tcpdoctor and tshark count against N.
#
# Goals (issue 29), printed as PASS or MISS: time per connection at the largest N within 1.3x of
# the smallest; >= 10x faster than tshark at 100000; peak RSS <= 1.5 KB per open connection at
# the largest N. A benchmark, not a test: exits 0 whatever the figures, non-zero if a step failed.
#
# Run (no root needed; ~1 min without tshark, tshark needs ~3 GB of memory at 400000):
#     scripts/bench-analyze-conns.sh
#     scripts/bench-analyze-conns.sh --sizes 20000,100000 --no-tshark
#     scripts/bench-analyze-conns.sh --baseline /tmp/tcpdoctor-old   # an older build, side by side
# Options: --sizes N,N,...  --runs N (default 1)  --no-tshark  --baseline BIN (also time BIN)
#          --keep DIR (copy the captures there)
# Binary: $CARGO_TARGET_DIR (default <repo>/target)/release/tcpdoctor, built here (release).
set -euo pipefail
# $EPOCHREALTIME and awk read the decimal point as C does, whatever the locale.
export LC_ALL=C

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"

SIZES=20000,100000,400000
RUNS=1
RUN_TSHARK=1
BASELINE=
KEEP_DIR=

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

while [ $# -gt 0 ]; do
    case "$1" in
    --sizes) SIZES=${2:?--sizes needs a value}; shift 2 ;;
    --runs) RUNS=${2:?--runs needs a value}; shift 2 ;;
    --no-tshark) RUN_TSHARK=0; shift ;;
    --baseline) BASELINE=${2:?--baseline needs a binary}; shift 2 ;;
    --keep) KEEP_DIR=${2:?--keep needs a directory}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench-analyze-conns: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ "$SIZES" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "bench-analyze-conns: bad --sizes '$SIZES'" >&2; exit 2; }
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "bench-analyze-conns: bad --runs '$RUNS'" >&2; exit 2; }
[ -z "$BASELINE" ] || [ -x "$BASELINE" ] || { echo "bench-analyze-conns: --baseline $BASELINE is not an executable" >&2; exit 2; }
IFS=, read -r -a NS <<<"$SIZES"

say() { printf '\n== %s\n' "$*"; }
[ -x /usr/bin/time ] || { echo "bench-analyze-conns: /usr/bin/time missing (apt-get install time)" >&2; exit 2; }
if [ "$RUN_TSHARK" = 1 ] && ! command -v tshark >/dev/null 2>&1; then
    echo "tshark not found (apt-get install tshark): the tshark column is left empty"
    RUN_TSHARK=0
fi
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi

say "build (release)"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
(cd "$REPO" && cargo build --release -p tcpdoctor && cargo build --release -p tcpdoctor-core --example concurrent_conns)
BIN=$CARGO_TARGET_DIR/release/tcpdoctor
GEN=$CARGO_TARGET_DIR/release/examples/concurrent_conns
echo "tcpdoctor: $BIN ($("$BIN" --version), commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown))"
[ -z "$BASELINE" ] || echo "baseline:  $BASELINE ($("$BASELINE" --version))"

# timed CMD... : runs CMD under /usr/bin/time; sets T_WALL (s, from the shell's microsecond
# clock around it: /usr/bin/time's %e has 10 ms steps, a fifth of the 20000 case's 0.05 s)
# and T_RSS_KIB.
timed() {
    local tf=$WORK/time.txt rc=0 t0 t1 e
    t0=$EPOCHREALTIME
    /usr/bin/time -f '%e %M' -o "$tf" "$@" || rc=$?
    t1=$EPOCHREALTIME
    read -r e T_RSS_KIB < <(tail -n 1 "$tf")
    T_WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", b - a}')
    return "$rc"
}
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# measure BIN N F : median wall of RUNS runs and the largest peak RSS; checks the flow count.
measure() {
    local bin=$1 n=$2 f=$3 walls=() rss=0 i flows
    for i in $(seq "$RUNS"); do
        timed "$bin" analyze --format json "$f" >"$WORK/report.json" || { echo "bench-analyze-conns: $bin exited non-zero on $f" >&2; exit 1; }
        walls+=("$T_WALL")
        [ "$T_RSS_KIB" -le "$rss" ] || rss=$T_RSS_KIB
    done
    flows=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["captures"][0]["flows"])' "$WORK/report.json")
    [ "$flows" = "$n" ] || echo "WARNING: $bin counted $flows flows in a capture of $n"
    M_WALL=$(printf '%s\n' "${walls[@]}" | median)
    M_RSS_KIB=$rss
}

ROWS=()
for n in "${NS[@]}"; do
    F=$WORK/conns-$n.pcap
    say "N = $n"
    t0=$EPOCHREALTIME
    "$GEN" "$F" "$n" >"$WORK/gen.txt"
    echo "generated $(sed -n 's/^packets=//p' "$WORK/gen.txt") packets, $(stat -c %s "$F") bytes in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}') s"
    cat "$F" >/dev/null
    measure "$BIN" "$n" "$F"
    TD_WALL=$M_WALL TD_RSS=$M_RSS_KIB
    echo "tcpdoctor: $TD_WALL s, peak RSS $TD_RSS KiB"
    B_WALL= B_RSS=
    if [ -n "$BASELINE" ]; then
        measure "$BASELINE" "$n" "$F"
        B_WALL=$M_WALL B_RSS=$M_RSS_KIB
        echo "baseline:  $B_WALL s, peak RSS $B_RSS KiB"
    fi
    TS_WALL= TS_RSS=
    if [ "$RUN_TSHARK" = 1 ]; then
        timed tshark -q -z conv,tcp -r "$F" >"$WORK/conv.txt" 2>"$WORK/tshark.err" || { cat "$WORK/tshark.err" >&2; exit 1; }
        TS_WALL=$T_WALL TS_RSS=$T_RSS_KIB
        convs=$(grep -c '<->' "$WORK/conv.txt" || true)
        echo "tshark:    $TS_WALL s, peak RSS $TS_RSS KiB, $convs conversations"
        [ "$convs" = "$n" ] || echo "WARNING: tshark counted $convs conversations in a capture of $n"
    fi
    ROWS+=("$n $TD_WALL $TD_RSS ${B_WALL:--} ${B_RSS:--} ${TS_WALL:--} ${TS_RSS:--}")
    if [ -n "$KEEP_DIR" ]; then mkdir -p "$KEEP_DIR" && cp "$F" "$KEEP_DIR/"; fi
    rm -f "$F"
done

say "results (µs = wall time per connection; KB = 10^3 bytes of peak RSS per open connection)"
printf '%s\n' "${ROWS[@]}" | awk -v base="$BASELINE" '
function us(w, n) { if (w <= 0) w = 0.0001; return w * 1e6 / n }
function kb(r, n) { return r * 1024 / 1e3 / n }
{
    n[NR] = $1; tw[NR] = $2; tr[NR] = $3; bw[NR] = $4; br[NR] = $5; sw[NR] = $6; sr[NR] = $7
}
END {
    if (base != "") {
        printf "%-12s %10s %10s %10s %10s %12s %12s %10s %10s\n", "connections", "µs/conn", "KB/conn", "base µs", "base KB", "tshark µs", "tshark KB", "tshark/td", "tshark/base"
    } else {
        printf "%-12s %10s %10s %12s %12s %12s\n", "connections", "µs/conn", "KB/conn", "tshark µs", "tshark KB", "tshark/td"
    }
    for (i = 1; i <= NR; i++) {
        ratio = (sw[i] == "-") ? "-" : sprintf("%.1fx", (sw[i] <= 0 ? 0.01 : sw[i]) / (tw[i] <= 0 ? 0.01 : tw[i]))
        tsu = (sw[i] == "-") ? "-" : sprintf("%.2f", us(sw[i], n[i]))
        tsk = (sr[i] == "-") ? "-" : sprintf("%.2f", kb(sr[i], n[i]))
        if (base != "")
            printf "%-12d %10.2f %10.2f %10.2f %10.2f %12s %12s %10s %10s\n", n[i], us(tw[i], n[i]), kb(tr[i], n[i]), us(bw[i], n[i]), kb(br[i], n[i]), tsu, tsk, ratio, (sw[i] == "-") ? "-" : sprintf("%.1fx", (sw[i] <= 0 ? 0.01 : sw[i]) / (bw[i] <= 0 ? 0.01 : bw[i]))
        else
            printf "%-12d %10.2f %10.2f %12s %12s %12s\n", n[i], us(tw[i], n[i]), kb(tr[i], n[i]), tsu, tsk, ratio
        if (n[i] == 100000 && sw[i] != "-") at100k = (sw[i] <= 0 ? 0.01 : sw[i]) / (tw[i] <= 0 ? 0.01 : tw[i])
    }
    print ""
    print "goals:"
    g = "  %-4s  %-58s %s\n"
    growth = us(tw[NR], n[NR]) / us(tw[1], n[1])
    if (NR > 1) printf g, (growth <= 1.3 ? "PASS" : "MISS"), sprintf("time per connection at %d within 1.3x of %d", n[NR], n[1]), sprintf("%.2fx", growth)
    if (at100k != "") printf g, (at100k >= 10 ? "PASS" : "MISS"), ">= 10x faster than tshark -z conv,tcp at 100000", sprintf("%.1fx", at100k)
    else printf g, "----", ">= 10x faster than tshark -z conv,tcp at 100000", "not measured (no tshark run at 100000)"
    printf g, (kb(tr[NR], n[NR]) <= 1.5 ? "PASS" : "MISS"), sprintf("peak RSS <= 1.5 KB per open connection at %d", n[NR]), sprintf("%.2f KB", kb(tr[NR], n[NR]))
}'
