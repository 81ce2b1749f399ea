#!/usr/bin/env bash
# Side-by-side benchmark of `tcpdoctor proxy` against socat and haproxy (tcp mode), over
# loopback: added latency per hop (ping-pong, TCP_NODELAY, 1 B and 1 KiB, median and p99, µs)
# and bulk throughput (GB/s and ratio to direct).
#
#   scripts/bench-proxy.sh                 # 20000 round trips, 2 GiB bulk
#   ROUNDS=5000 BULK_BYTES=$((1<<30)) scripts/bench-proxy.sh
#   TD_ARGS="--threads 2" scripts/bench-proxy.sh   # extra flags for tcpdoctor proxy
#
# Needs: cargo, socat, haproxy (apt-get install socat haproxy). Proxies missing are skipped.
# Everything listens on 127.0.0.1 on free ports; every process started here is stopped on exit.
set -euo pipefail

ROUNDS=${ROUNDS:-20000}
BULK_BYTES=${BULK_BYTES:-$((2 << 30))}
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --quiet --release -p tcpdoctor --bin tcpdoctor --example netbench
TD=$CARGO_TARGET_DIR/release/tcpdoctor
NB=$CARGO_TARGET_DIR/release/examples/netbench
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits (bounded) until something accepts on 127.0.0.1:$1.
wait_port() {
    for _ in $(seq 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "nothing listening on port $1" >&2
    return 1
}

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
    wait_port "$port"
    PORT=$port
}

KINDS=(tcpdoctor)
command -v socat >/dev/null && KINDS+=(socat) || echo "socat not found: skipped" >&2
command -v haproxy >/dev/null && KINDS+=(haproxy) || echo "haproxy not found: skipped" >&2

declare -A EPORT SPORT
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

echo
echo "== bulk: $BULK_BYTES bytes one way (GB/s) =="
direct=$("$NB" bulk "127.0.0.1:$SINK" "$BULK_BYTES")
printf '%-10s %8s %8s\n' path GB/s ratio
printf '%-10s %8s %8s\n' direct "$direct" 1.00
for k in "${KINDS[@]}"; do
    r=$("$NB" bulk "127.0.0.1:${SPORT[$k]}" "$BULK_BYTES")
    printf '%-10s %8s %8s\n' "$k" "$r" "$(echo "scale=2; $r / $direct" | bc)"
done
