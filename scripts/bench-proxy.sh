#!/usr/bin/env bash
# Side-by-side benchmark of `tcpdoctor proxy` against socat and haproxy (tcp mode), over
# loopback: added latency per hop (ping-pong, TCP_NODELAY, 1 B and 1 KiB, median and p99, µs)
# bulk throughput (GB/s, ratio to direct, the proxy's CPU per GB), and how precisely
# `--delay` holds the delay it is given.
#
#   scripts/bench-proxy.sh                 # 20000 round trips, 2 GiB bulk
#   ROUNDS=5000 BULK_BYTES=$((1<<30)) scripts/bench-proxy.sh
#   TD_ARGS="--threads 2" scripts/bench-proxy.sh   # extra flags for tcpdoctor proxy
#   ONLY=delay scripts/bench-proxy.sh      # only the --delay precision table (and its baseline)
#   NO_BUILD=1 TD_BIN=/tmp/td-old scripts/bench-proxy.sh  # another tcpdoctor binary, A/B
#
# Needs: cargo, socat, haproxy (installed with apt-get when missing and run as root; otherwise
# the missing proxies are skipped).
# Everything listens on 127.0.0.1 on free ports; every process started here is stopped on exit.
set -euo pipefail

ROUNDS=${ROUNDS:-20000}
ONLY=${ONLY:-}
case $ONLY in '' | delay) ;; *) echo "ONLY=$ONLY: expected empty or delay" >&2; exit 2 ;; esac
BULK_BYTES=${BULK_BYTES:-$((2 << 30))}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
[ -n "${NO_BUILD:-}" ] || cargo build --quiet --release -p tcpdoctor --bin tcpdoctor --example netbench
TD=${TD_BIN:-$CARGO_TARGET_DIR/release/tcpdoctor}
NB=$CARGO_TARGET_DIR/release/examples/netbench
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

# Starts a server whose first stdout line is `ready`, and waits for that line.
start_ready() {
    local fifo=$WORK/ready.$RANDOM
    mkfifo "$fifo"
    "$@" >"$fifo" &
    PIDS+=($!)
    read -r -t 10 line <"$fifo"
    [ "$line" = ready ]
}

ECHO=$(free_port); SINK=$(free_port)
start_ready "$NB" echo "127.0.0.1:$ECHO"
start_ready "$NB" sink "127.0.0.1:$SINK"
SINK_PID=${PIDS[-1]}

# start_proxy KIND UPSTREAM_PORT: starts it and sets PORT to the port it listens on. (Not run
# in $(...): the background process would hold the substitution's pipe open forever.)
start_proxy() {
    local kind=$1 up=$2 port
    port=$(free_port)
    case $kind in
    tcpdoctor)
        "$TD" proxy --listen "127.0.0.1:$port" --upstream "127.0.0.1:$up" ${TD_ARGS:-} \
            >/dev/null 2>"$WORK/td.$port.log" &
        ;;
    socat)
        socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork,nodelay" "TCP:127.0.0.1:$up,nodelay" \
            >/dev/null 2>&1 &
        ;;
    haproxy)
        cat >"$WORK/haproxy.$port.cfg" <<EOF
global
    maxconn 1000
defaults
    mode tcp
    timeout connect 5s
    timeout client 5m
    timeout server 5m
frontend f
    bind 127.0.0.1:$port
    default_backend b
backend b
    server s1 127.0.0.1:$up
EOF
        haproxy -db -f "$WORK/haproxy.$port.cfg" >/dev/null 2>&1 &
        ;;
    esac
    PIDS+=($!)
    PROXY_PID[$port]=$!
    wait_port "$port"
    PORT=$port
}

# start_delayed MICROSECONDS: a tcpdoctor proxy in front of the echo server with that delay.
start_delayed() {
    local port
    port=$(free_port)
    "$TD" proxy --listen "127.0.0.1:$port" --upstream "127.0.0.1:$ECHO" --delay "$1us" \
        >/dev/null 2>"$WORK/td.$port.log" &
    PIDS+=($!)
    wait_port "$port"
    PORT=$port
}

KINDS=(tcpdoctor)
if [ -n "$ONLY" ]; then
    :
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    for tool in socat haproxy; do
        command -v "$tool" >/dev/null ||
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$tool" >/dev/null ||
            true
    done
fi
if [ -z "$ONLY" ]; then
    command -v socat >/dev/null && KINDS+=(socat) || echo "socat not found: skipped" >&2
    command -v haproxy >/dev/null && KINDS+=(haproxy) || echo "haproxy not found: skipped" >&2
fi

declare -A EPORT SPORT PROXY_PID
for k in "${KINDS[@]}"; do
    start_proxy "$k" "$ECHO"; EPORT[$k]=$PORT
    start_proxy "$k" "$SINK"; SPORT[$k]=$PORT
done

# Quantile $2 (0..1) of the numbers in file $1.
quantile() {
    sort -n "$1" | awk -v q="$2" '{ v[NR] = $1 } END { i = int(NR * q); if (i < 1) i = 1; print v[i] }'
}

# The paths take turns (REPEATS rounds each), so drifting background load hits all alike.
REPEATS=${REPEATS:-4}
PATHS=(direct "${KINDS[@]}")
if [ "$ONLY" = delay ]; then
    # The delay table's baseline: the undelayed proxy's 1 B round trip.
    for _ in $(seq "$REPEATS"); do
        "$NB" pingpong "127.0.0.1:${EPORT[tcpdoctor]}" 1 $((ROUNDS / REPEATS)) "$WORK/pp.tcpdoctor.1" >/dev/null
    done
else # the full benchmark: ping-pong and bulk tables
    echo "== ping-pong: $ROUNDS round trips per path on one connection each, TCP_NODELAY, in $REPEATS interleaved rounds (µs) =="
    printf '%-10s %6s %10s %10s %14s %14s\n' path size median p99 "added median" "added p99"
    for size in 1 1024; do
        for _ in $(seq "$REPEATS"); do
            for p in "${PATHS[@]}"; do
                port=$ECHO
                [ "$p" = direct ] || port=${EPORT[$p]}
                "$NB" pingpong "127.0.0.1:$port" "$size" $((ROUNDS / REPEATS)) "$WORK/pp.$p.$size" >/dev/null
            done
        done
        dmed=$(quantile "$WORK/pp.direct.$size" 0.5)
        dp99=$(quantile "$WORK/pp.direct.$size" 0.99)
        printf '%-10s %6s %10s %10s %14s %14s\n' direct "$size" "$dmed" "$dp99" - -
        for k in "${KINDS[@]}"; do
            med=$(quantile "$WORK/pp.$k.$size" 0.5)
            p99=$(quantile "$WORK/pp.$k.$size" 0.99)
            printf '%-10s %6s %10s %10s %14s %14s\n' "$k" "$size" "$med" "$p99" \
                "$(echo "$med - $dmed" | bc)" "$(echo "$p99 - $dp99" | bc)"
        done
    done

    # CPU seconds (user + system, the process and its reaped children) of process $1 so far.
    cpu_s() {
        awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print ($12 + $13 + $14 + $15) / hz }' "/proc/$1/stat"
    }

    echo
    echo "== bulk: $BULK_BYTES bytes one way per run, $REPEATS interleaved runs per path (median GB/s) =="
    echo "   CPU s/GB: CPU time (user + system) per GB forwarded, of the proxy process and of the"
    echo "   whole path (sender + proxy + sink). ceiling: the throughput the path's CPU allows when"
    echo "   all $(nproc) cores do nothing else, as a ratio to direct — what a proxy can reach here."
    # bulk_run LABEL PORT PROXY_PID|-: one run; appends GB/s, proxy CPU s and path CPU s.
    bulk_run() {
        local label=$1 port=$2 pid=$3 p0=0 p1=0 s0 s1 out
        [ "$pid" = - ] || p0=$(cpu_s "$pid")
        s0=$(cpu_s "$SINK_PID")
        out=$("$NB" bulk "127.0.0.1:$port" "$BULK_BYTES")
        sleep 0.2 # socat reaps its per-connection child; its CPU lands in the parent's count
        [ "$pid" = - ] || p1=$(cpu_s "$pid")
        s1=$(cpu_s "$SINK_PID")
        set -- $out
        echo "$1" >>"$WORK/bulk.$label"
        echo "$p1 - $p0" | bc >>"$WORK/cpu.$label"
        echo "$2 + $s1 - $s0 + $p1 - $p0" | bc >>"$WORK/path.$label"
    }
    for _ in $(seq "$REPEATS"); do
        bulk_run direct "$SINK" -
        for k in "${KINDS[@]}"; do
            bulk_run "$k" "${SPORT[$k]}" "${PROXY_PID[${SPORT[$k]}]}"
        done
    done
    gb=$(echo "scale=6; $BULK_BYTES / 1000000000" | bc)
    direct=$(quantile "$WORK/bulk.direct" 0.5)
    dpath=$(echo "scale=3; $(quantile "$WORK/path.direct" 0.5) / $gb" | bc)
    printf '%-10s %8s %7s %11s %11s %9s  %s\n' path GB/s ratio "proxy CPU" "path CPU" ceiling "runs (GB/s)"
    printf '%-10s %8s %7s %11s %11s %9s  %s\n' direct "$direct" 1.00 - "$dpath" - "$(tr '\n' ' ' <"$WORK/bulk.direct")"
    for k in "${KINDS[@]}"; do
        r=$(quantile "$WORK/bulk.$k" 0.5)
        cpu=$(echo "scale=3; $(quantile "$WORK/cpu.$k" 0.5) / $gb" | bc)
        path=$(echo "scale=3; $(quantile "$WORK/path.$k" 0.5) / $gb" | bc)
        # GB/s the cores could carry = cores / (CPU s per GB), capped by direct's own rate.
        ceil=$(echo "scale=2; c = $(nproc) / $path / $direct; if (c > 1) c = 1; c" | bc)
        printf '%-10s %8s %7s %11s %11s %9s  %s\n' "$k" "$r" "$(echo "scale=2; $r / $direct" | bc)" \
            "$cpu" "$path" "$ceil" "$(tr '\n' ' ' <"$WORK/bulk.$k")"
    done

fi # ONLY

# How close `--delay` comes to what was asked: the added round trip through a delaying proxy
# should be twice the one-way delay on top of the undelayed proxy's own round trip.
echo
echo "== delay precision: tcpdoctor proxy --delay D (each way), 1 B ping-pong, added round trip (µs) =="
echo "   error: added round trip minus 2·D, against the undelayed proxy's round trip (the peers'"
echo "   own wake-up costs are in it). proxy late: how late the proxy's timed writes left their"
echo "   due time, from its own summary (power-of-two bucket bounds, both directions)."
printf '%-8s %8s %10s %10s %12s %12s %16s\n' delay rounds expected "added p50" "error p50" "error p99" \
    "proxy late p50/p99"
base=$(quantile "$WORK/pp.tcpdoctor.1" 0.5)
for d_us in ${DELAYS_US:-100 250 1000 5000}; do
    rounds=$((2000000 / (d_us + 1000)))
    start_delayed "$d_us"
    "$NB" pingpong "127.0.0.1:$PORT" 1 "$rounds" "$WORK/delay.$d_us" >/dev/null
    kill -INT "${PIDS[-1]}"
    wait "${PIDS[-1]}" 2>/dev/null || true
    late=$(sed -nE 's/.*late by ≤ ([0-9]+) µs \(p50\), ≤ ([0-9]+) µs \(p99\).*/\1\/\2/p' \
        "$WORK/td.$PORT.log" | sort -t/ -k2 -n | tail -1)
    expected=$((2 * d_us))
    med=$(quantile "$WORK/delay.$d_us" 0.5)
    p99=$(quantile "$WORK/delay.$d_us" 0.99)
    added=$(echo "$med - $base" | bc)
    printf '%-8s %8s %10s %10s %12s %12s %16s\n' "${d_us}us" "$rounds" "$expected" "$added" \
        "$(echo "$added - $expected" | bc)" "$(echo "$p99 - $base - $expected" | bc)" "≤ ${late:-?}"
done
