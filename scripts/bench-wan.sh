#!/usr/bin/env bash
# Benchmark of the WAN delay line (`tcpdoctor sandbox --delay`: two network namespaces, a TUN
# device in each, tcpdoctor's delay-line thread moving IP packets between them), in one run:
#
#   1. added latency at delay 0: 1-byte ping-pong round trips (TCP_NODELAY, one connection,
#      p50 and p99, µs) through the line, against the same ping-pong directly on loopback and
#      through the Python TUN line specimens/wanlink.py (--delay 0);
#   2. the delay held at 1 ms, 15 ms and 100 ms one way, measured at the endpoints' sockets:
#      each exchange's round trip minus 2 × delay minus the direct loopback round trip (its
#      median) is the error of two traversals; the table gives p50/p99 of its magnitude, and
#      halved (per traversal); also against the line's own round trip at delay 0, and
#      wanlink.py at 15 ms as a reference. This is what an application sees: it includes each
#      endpoint's own wake-up after sleeping D;
#   2b. the delay held per packet at the endpoints' devices (what the goals are about): the
#      same ping-pong with a real tcpdump inside each namespace on its TUN device (tdnear0 in
#      the client's, tdfar0 in the server's: the sandbox's commands keep CAP_NET_RAW there),
#      the kernel's timestamps, not the line's; each packet paired across the two captures
#      (scripts/wan-delay-pairs.py: IP id, ports, seq, ack, flags, length) and
#      |(t_far − t_near) − D| reported per direction and for all packets (p50, p99, max);
#   2c. the same at 15 ms with a busy loop on every CPU (the line must not give its CPU away
#      for a whole time slice at every packet);
#   2d. the delay held per data packet at the endpoints' kernels with nothing watching: the
#      sockets' own SO_TIMESTAMPING software stamps (send: as the packet enters the sender's
#      device; receive: as the device hands it to the receiver's stack), no tcpdump;
#   3. bulk throughput one way (MB/s = 10^6 B/s, median of REPEATS interleaved runs): direct
#      loopback, the line with delay only (1 ms), wanlink.py at 1 ms, and the line with
#      per-packet work (1 ms plus loss=0.1%, and 1 ms plus rate=1gbit).
#
# Goals (printed PASS/MISS): added latency p50 ≤ 50 µs; at 15 ms the per-packet delay error
# (2b, all packets) p50 ≤ 20 µs and p99 ≤ 300 µs (2's per-traversal figure is printed beside
# it); bulk with delay only ≥ 1 GB/s and ≥ 10× wanlink.py. Each section prints the load
# average when it starts: the figures mean little on a busy machine.
#
# tcpdoctor runs unprivileged (no real-time priority): as root, through
# `setpriv --reuid=65534 --regid=65534 --clear-groups`, which needs user namespaces and
# /dev/net/tun open to everyone (mode 0666). wanlink.py needs root (ip netns) and iproute2; it is
# run with --rt-prio 0 (no real-time priority either; WANLINK_ARGS to change) and skipped with a
# message when not root. Ping-pong and bulk use the netbench example (echo, sink, pingpong, bulk).
#
#   scripts/bench-wan.sh                      # ~80 s on a 2-vCPU VM (figures: docs/wan.md)
#   ROUNDS=3000 REPEATS=3 scripts/bench-wan.sh
#   NO_WANLINK=1 scripts/bench-wan.sh         # only tcpdoctor's line and loopback
#   NO_BUILD=1 TD_BIN=/tmp/td-old scripts/bench-wan.sh   # another tcpdoctor binary, A/B
#
# Knobs: ROUNDS (delay-0 round trips per path, default 6000), REPEATS (interleaved rounds,
# default 3), BULK_MB (line and direct bulk size, MiB, default 512), WANLINK_BULK_MB (default
# 128), DELAYS_MS (default "1 15 100"). Exit 0 whatever the figures; non-zero only if a step
# failed. Every step has a time limit; the namespaces go with the processes that made them.
set -euo pipefail

ROUNDS=${ROUNDS:-6000}
REPEATS=${REPEATS:-3}
BULK_MB=${BULK_MB:-512}
WANLINK_BULK_MB=${WANLINK_BULK_MB:-128}
DELAYS_MS=${DELAYS_MS:-1 15 100}
WANLINK_ARGS=${WANLINK_ARGS:---rt-prio 0}
cd "$(dirname "$0")/.."
REPO=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
[ -n "${NO_BUILD:-}" ] || cargo build --quiet --release -p tcpdoctor --bin tcpdoctor --example netbench
TD=${TD_BIN:-$CARGO_TARGET_DIR/release/tcpdoctor}
NB=$CARGO_TARGET_DIR/release/examples/netbench
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
on_error() {
    echo "bench-wan.sh: a step failed (line $1); the end of the line's and wanlink's stderr:" >&2
    tail -n 5 "$WORK/line.log" "$WORK/wanlink.log" >&2 2>/dev/null || true
}
set -E # the trap below fires inside functions too
trap 'on_error $LINENO' ERR

# Who runs tcpdoctor: never root, so never real-time priority or root's privileges.
AS_USER=()
if [ "$(id -u)" = 0 ]; then
    AS_USER=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    # The unprivileged runs write their samples here.
    chmod 0755 "$WORK"
    mkdir -m 0777 "$WORK/u"
else
    mkdir "$WORK/u"
fi
U=$WORK/u
if ! "${AS_USER[@]}" test -x "$TD" -a -x "$NB"; then
    echo "bench-wan.sh: $TD or $NB is not executable by uid $("${AS_USER[@]}" id -u)" \
        "(put CARGO_TARGET_DIR where that user can read it)" >&2
    exit 1
fi
tun_mode=$(stat -c %a /dev/net/tun 2>/dev/null || echo missing)
[ "$tun_mode" = 666 ] ||
    echo "note: /dev/net/tun is mode $tun_mode, not 0666: an unprivileged user may not open it" >&2

WANLINK=1
if [ -n "${NO_WANLINK:-}" ]; then
    WANLINK=
    echo "wanlink.py: skipped (NO_WANLINK)" >&2
elif [ "$(id -u)" != 0 ]; then
    WANLINK=
    echo "wanlink.py: skipped (it needs root: ip netns, TUN devices)" >&2
elif ! command -v ip >/dev/null; then
    WANLINK=
    echo "wanlink.py: skipped (no ip binary: apt-get install iproute2)" >&2
fi

# line OPTIONS... -- CLIENT...: runs CLIENT through `tcpdoctor sandbox` with the netbench
# server SERVER (echo or sink) in the far namespace; the line's summary goes to $WORK/line.log.
line() {
    local server=$1
    shift
    sandboxed --server "$NB $server 127.0.0.1:7000" "$@"
}

# sandboxed SANDBOX-OPTIONS... -- CLIENT...: tcpdoctor sandbox as the unprivileged user, the
# server on port 7000, within the time limit; its stderr (the line's summary) into line.log.
sandboxed() {
    timeout 120 "${AS_USER[@]}" "$TD" sandbox --server-port 7000 "$@" 2>>"$WORK/line.log"
}

# wanlink DELAY SERVER CLIENT...: the same through the Python line (server at 0.0.0.0:7000).
wanlink() {
    local delay=$1 server=$2
    shift 2
    # shellcheck disable=SC2086 # WANLINK_ARGS is a word list
    timeout 120 python3 "$REPO/specimens/wanlink.py" --delay "$delay" $WANLINK_ARGS \
        --ready '^ready$' --server "$NB $server 0.0.0.0:7000" --client "$*" 2>>"$WORK/wanlink.log"
}

# calc EXPR: the value of an arithmetic expression, one decimal.
calc() { awk "BEGIN { printf \"%.1f\", $1 }"; }
half() { calc "$1 / 2"; }

# Quantile $2 (0..1) of the numbers in file $1, nearest rank (the median of 3 is the middle one).
quantile() {
    sort -n "$1" | awk -v q="$2" '{ v[NR] = $1 }
        END { i = int(NR * q); if (i < NR * q) i++; if (i < 1) i = 1; print v[i] }'
}

# The per-packet tables of sections 2b-2d. per_packet_rounds D_MS: round trips for about 10 s
# of ping-pong at that one-way delay (at least 40). per_packet_header: the table's header.
# per_packet_rows DELAY LOAD [KEEP]: one row per line the pairing scripts print
# (wan-delay-pairs.py, wan-delay-stamps.py), read from stdin; with KEEP, the "all" row's p50
# and p99 are written to that file (the goals below read them).
per_packet_rounds() {
    local r=$((10000 / (2 * $1 + 8)))
    [ "$r" -ge 40 ] || r=40
    echo "$r"
}
per_packet_header() {
    printf '%-8s %-5s %6s %9s %9s %9s %9s %9s   %s\n' delay way n unpaired signed p50 p99 max load
}
per_packet_rows() {
    local delay=$1 load=$2 keep=${3:-} way n unp signed p50 p99 max _
    while read -r way n unp signed p50 p99 max _; do
        printf '%-8s %-5s %6s %9s %9s %9s %9s %9s   %s\n' "$delay" "$way" "${n#n=}" \
            "${unp#unpaired=}" "${signed#signed_p50=}" "${p50#abs_p50=}" \
            "${p99#abs_p99=}" "${max#abs_max=}" "$load"
        if [ -n "$keep" ] && [ "$way" = all ]; then
            echo "${p50#abs_p50=} ${p99#abs_p99=}" >"$keep"
        fi
    done
}

ECHO=$(free_port)
"$NB" echo "127.0.0.1:$ECHO" >/dev/null &
PIDS+=($!)
wait_port "$ECHO"
SINK=$(free_port)
"$NB" sink "127.0.0.1:$SINK" >/dev/null &
PIDS+=($!)
wait_port "$SINK"

echo "tcpdoctor runs as uid $("${AS_USER[@]}" id -u) (no real-time priority); /dev/net/tun mode" \
    "$tun_mode; TCP congestion control $(cat /proc/sys/net/ipv4/tcp_congestion_control);" \
    "$(nproc) CPUs; $(uname -r)"

# 1. Added latency at delay 0. The paths take turns so drifting load hits all alike.
per=$((ROUNDS / REPEATS))
PATHS=(direct line)
[ -z "$WANLINK" ] || PATHS+=(wanlink)
for _ in $(seq "$REPEATS"); do
    for p in "${PATHS[@]}"; do
        case $p in
        direct) "$NB" pingpong "127.0.0.1:$ECHO" 1 "$per" "$U/pp.direct" >/dev/null ;;
        line) line echo --delay 0 -- "$NB" pingpong 198.18.0.1:7000 1 "$per" "$U/pp.line" >/dev/null ;;
        wanlink) wanlink 0 echo "$NB" pingpong 198.18.0.1:7000 1 "$per" "$U/pp.wanlink" >/dev/null ;;
        esac
    done
done
echo "delay 0: tcpdoctor takes it ($(sed -nE 's/.*sandbox: (path [^:]+:[^:]+): .*/\1/p' "$WORK/line.log" | head -1))"
echo
echo "== 1. added latency, delay 0: 1-byte ping-pong, $per round trips × $REPEATS interleaved runs per path (µs) =="
echo "   load average at the end of the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-26s %8s %8s %12s %12s\n' path p50 p99 "added p50" "added p99"
dmed=$(quantile "$U/pp.direct" 0.5)
dp99=$(quantile "$U/pp.direct" 0.99)
printf '%-26s %8s %8s %12s %12s\n' "direct loopback" "$dmed" "$dp99" - -
for p in line wanlink; do
    [ -f "$U/pp.$p" ] || continue
    med=$(quantile "$U/pp.$p" 0.5)
    p99=$(quantile "$U/pp.$p" 0.99)
    label="tcpdoctor line"
    [ "$p" = line ] || label="wanlink.py"
    printf '%-26s %8s %8s %12s %12s\n' "$label" "$med" "$p99" \
        "$(calc "$med - $dmed")" "$(calc "$p99 - $dp99")"
done
line_med=$(quantile "$U/pp.line" 0.5)
added=$(calc "$line_med - $dmed")

# 2. The delay held. error = RTT − 2·D − base, per exchange; |error| quantiles.
# errq FILE D_US BASE Q: quantile Q of |rtt − 2·D − BASE| over FILE's samples.
errq() {
    awk -v d="$2" -v b="$3" '{ e = $1 - 2 * d - b; if (e < 0) e = -e; printf "%.1f\n", e }' "$1" \
        >"$WORK/err"
    quantile "$WORK/err" "$4"
}
# signed FILE D_US BASE: the median signed error (positive: the path was slower than asked).
signed() {
    awk -v d="$2" -v b="$3" '{ printf "%.1f\n", $1 - 2 * d - b }' "$1" >"$WORK/err"
    quantile "$WORK/err" 0.5
}
echo
echo "== 2. delay held: 1-byte ping-pong over --delay D (each way); error = RTT − 2·D − direct"
echo "   loopback RTT p50 ($dmed µs), per exchange: two traversals; per traversal = half (µs) =="
echo "   vs line@0: per traversal against the line's own delay-0 RTT p50 ($line_med µs) instead"
echo "   (what an application sees; load average as the section starts: $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-22s %6s %10s %9s %9s %9s %10s %10s %16s\n' path rounds "RTT p50" "signed" "2× p50" \
    "2× p99" "1× p50" "1× p99" "vs line@0 1× p50/p99"
own=
for d_ms in $DELAYS_MS; do
    d_us=$((d_ms * 1000))
    rounds=$(per_packet_rounds "$d_ms")
    rm -f "$U/delay.$d_ms"
    # The line's own timing (stderr, TCPDOCTOR_LINE_TIMING): how late it wrote each packet.
    n0=$(cat "$WORK/line.log" 2>/dev/null | wc -l)
    TCPDOCTOR_LINE_TIMING=1 line echo --delay "${d_ms}ms" -- "$NB" pingpong 198.18.0.1:7000 1 "$rounds" "$U/delay.$d_ms" >/dev/null
    new=$(tail -n +$((n0 + 1)) "$WORK/line.log" | sed -n "s/^delay line: /   ${d_ms}ms: /p")
    own="$own${new:+$new
}"
    rows=(line "$U/delay.$d_ms")
    if [ -n "$WANLINK" ] && [ "$d_ms" = 15 ]; then
        rm -f "$U/wdelay.$d_ms"
        wanlink "${d_ms}ms" echo "$NB" pingpong 198.18.0.1:7000 1 "$rounds" "$U/wdelay.$d_ms" >/dev/null
        rows+=(wanlink "$U/wdelay.$d_ms")
    fi
    set -- "${rows[@]}"
    while [ $# -gt 0 ]; do
        label="tcpdoctor line ${d_ms}ms"
        [ "$1" = line ] || label="wanlink.py ${d_ms}ms"
        f=$2
        shift 2
        e50=$(errq "$f" "$d_us" "$dmed" 0.5)
        e99=$(errq "$f" "$d_us" "$dmed" 0.99)
        l50=$(errq "$f" "$d_us" "$line_med" 0.5)
        l99=$(errq "$f" "$d_us" "$line_med" 0.99)
        printf '%-22s %6s %10s %9s %9s %9s %10s %10s %16s\n' "$label" "$rounds" \
            "$(quantile "$f" 0.5)" "$(signed "$f" "$d_us" "$dmed")" "$e50" "$e99" "$(half "$e50")" \
            "$(half "$e99")" "$(half "$l50")/$(half "$l99")"
        if [ "$label" = "tcpdoctor line 15ms" ]; then
            goal15_50=$(half "$e50")
            goal15_99=$(half "$e99")
        fi
    done
done
echo "   the line's own delivery, per packet (write − due; the rest of the error is the wake-ups"
echo "   of the line on a packet and of the endpoint on its delivery):"
printf '%s' "${own:-   (not reported by this binary)
}"

# 2b. The delay held per packet, at the devices: tcpdump in each namespace, kernel timestamps.
# The far end's command starts its tcpdump, waits for it to listen, then runs the echo server;
# the near end's the same, then the ping-pong, then stops its tcpdump (SIGINT flushes it).
# tcpdump reads the kernel's ring a block at a time (a block is handed over when full or after
# tcpdump's 1 s buffer timeout), so it wakes about once a second, not for every packet as with
# --immediate-mode, which took CPU from the line and the endpoints at every packet (per packet
# at 15 ms: p50 26.2 / 26.3 µs with it, 22.9 / 24.7 without; p99 106-383 against 74-76). The
# near end waits 1.5 s after the ping-pong before stopping its tcpdump, so the last block of
# each capture has been handed over (nothing unpaired).
cat >"$WORK/far.sh" <<'SH'
tcpdump -p -U -n -s 128 --time-stamp-precision nano -i tdfar0 -w "$1/far.pcap" 2>"$1/far.err" &
for _ in $(seq 2000); do grep -q "listening on" "$1/far.err" && break; sleep 0.005; done
exec "$2" echo 127.0.0.1:7000
SH
cat >"$WORK/near.sh" <<'SH'
tcpdump -p -U -n -s 128 --time-stamp-precision nano -i tdnear0 -w "$1/near.pcap" 2>"$1/near.err" &
t=$!
for _ in $(seq 2000); do grep -q "listening on" "$1/near.err" && break; sleep 0.005; done
"$2" pingpong 198.18.0.1:7000 1 "$3" "$1/rtt"
sleep 1.5
kill -INT "$t"
wait "$t"
SH
chmod 0644 "$WORK/far.sh" "$WORK/near.sh"
echo
echo "== 2b. delay held per packet at the devices: tcpdump on tdnear0 and tdfar0 (kernel"
echo "   timestamps), the same ping-pong; error = |(t_far − t_near) − D| per packet (µs);"
echo "   unpaired: packets of one capture the other did not hold (the teardown in flight) =="
if ! command -v tcpdump >/dev/null; then
    echo "   skipped: no tcpdump (apt-get install tcpdump)"
else
    per_packet_header
    for d_ms in $DELAYS_MS; do
        rounds=$(per_packet_rounds "$d_ms")
        C=$U/cap.$d_ms
        mkdir -m 0777 "$C"
        load=$(cut -d' ' -f1 /proc/loadavg)
        if ! sandboxed --delay "${d_ms}ms" --server "sh $WORK/far.sh $C $NB" -- \
            sh "$WORK/near.sh" "$C" "$NB" "$rounds" >/dev/null ||
            [ ! -s "$C/near.pcap" ] || [ ! -s "$C/far.pcap" ]; then
            echo "   ${d_ms}ms: no captures (tcpdump inside the sandbox: $(head -c 200 "$C/near.err" 2>/dev/null | tr '\n' ' '))"
            continue
        fi
        keep=
        if [ "$d_ms" = 15 ]; then keep=$WORK/pp15; fi
        python3 scripts/wan-delay-pairs.py "$C/near.pcap" "$C/far.pcap" "$((d_ms * 1000))" |
            per_packet_rows "${d_ms}ms" "$load" "$keep"
    done
fi

# 2c. The same per-packet measurement at 15 ms with every CPU busy: one busy loop per CPU at
# normal priority beside the line (a server that computes, another job). The line must not
# hand such a loop its time slice at every packet (docs/wan.md, "Staying awake after a
# packet"): the p50 stays tens of microseconds, not milliseconds.
echo
echo "== 2c. the same at 15 ms with a busy loop on each of the $(nproc) CPUs (per packet, devices, µs) =="
if command -v tcpdump >/dev/null; then
    per_packet_header
    C=$U/cap.busy
    mkdir -m 0777 "$C"
    HOGS=()
    for _ in $(seq "$(nproc)"); do
        timeout 150 sh -c 'while :; do :; done' &
        HOGS+=($!)
    done
    load=$(cut -d' ' -f1 /proc/loadavg)
    if sandboxed --delay 15ms --server "sh $WORK/far.sh $C $NB" -- \
        sh "$WORK/near.sh" "$C" "$NB" 150 >/dev/null &&
        [ -s "$C/near.pcap" ] && [ -s "$C/far.pcap" ]; then
        python3 scripts/wan-delay-pairs.py "$C/near.pcap" "$C/far.pcap" 15000 |
            per_packet_rows 15ms "$load"
    else
        echo "   15ms: no captures"
    fi
    kill "${HOGS[@]}" 2>/dev/null || true
    wait "${HOGS[@]}" 2>/dev/null || true
else
    echo "   skipped: no tcpdump"
fi

# 2d. The delay held per packet at the endpoints themselves, with nothing watching: no
# tcpdump; each end's socket asks the kernel for software timestamps (SO_TIMESTAMPING), the
# sender's taken as its packet enters its device, the receiver's as the device hands it to
# the stack (netbench pingpong-stamped / echo-stamped, one byte each way per round trip;
# scripts/wan-delay-stamps.py pairs them by byte). Data packets only (no pure ACKs).
echo
echo "== 2d. the same at the endpoints' sockets: the kernel's send and receive stamps of each"
echo "   data byte (SO_TIMESTAMPING), no tcpdump; error = |(rx_far − tx_near) − D| (µs) =="
per_packet_header
for d_ms in $DELAYS_MS; do
    rounds=$(per_packet_rounds "$d_ms")
    C=$U/stamps.$d_ms
    mkdir -m 0777 "$C"
    load=$(cut -d' ' -f1 /proc/loadavg)
    if ! sandboxed --delay "${d_ms}ms" \
        --server "exec $NB echo-stamped 127.0.0.1:7000 $rounds $C/far.ts" -- \
        "$NB" pingpong-stamped 198.18.0.1:7000 "$rounds" "$C/near.ts" >/dev/null ||
        [ ! -s "$C/near.ts" ] || [ ! -s "$C/far.ts" ]; then
        echo "   ${d_ms}ms: no stamps (see $WORK/line.log)"
        continue
    fi
    keep=
    if [ "$d_ms" = 15 ]; then keep=$WORK/st15; fi
    python3 scripts/wan-delay-stamps.py "$C/near.ts" "$C/far.ts" "$((d_ms * 1000))" |
        per_packet_rows "${d_ms}ms" "$load" "$keep"
done

# 3. Bulk: BYTES one way, then the sink's one-byte answer (netbench bulk prints GB/s).
echo
echo "== 3. bulk one way: netbench bulk → sink, median of $REPEATS interleaved runs (MB/s = 10^6 B/s) =="
echo "   load average as the section starts: $(cut -d' ' -f1-3 /proc/loadavg)"
BULK=$((BULK_MB << 20))
WBULK=$((WANLINK_BULK_MB << 20))
BPATHS=(direct delay loss rate)
[ -z "$WANLINK" ] || BPATHS=(direct delay wanlink loss rate)
gbps() { grep -E '^[0-9.]+ [0-9.]+$' | tail -1 | cut -d' ' -f1; }
for _ in $(seq "$REPEATS"); do
    for p in "${BPATHS[@]}"; do
        case $p in
        direct) "$NB" bulk "127.0.0.1:$SINK" "$BULK" | gbps >>"$WORK/bulk.$p" ;;
        delay) line sink --delay 1ms -- "$NB" bulk 198.18.0.1:7000 "$BULK" | gbps >>"$WORK/bulk.$p" ;;
        loss) line sink --delay 1ms --loss 0.1% -- "$NB" bulk 198.18.0.1:7000 "$BULK" | gbps >>"$WORK/bulk.$p" ;;
        rate) line sink --delay 1ms --rate 1gbit -- "$NB" bulk 198.18.0.1:7000 "$BULK" | gbps >>"$WORK/bulk.$p" ;;
        wanlink) wanlink 1ms sink "$NB" bulk 198.18.0.1:7000 "$WBULK" | gbps >>"$WORK/bulk.$p" ;;
        esac
    done
done
mbs() { awk -v g="$(quantile "$WORK/bulk.$1" 0.5)" 'BEGIN { printf "%.0f", g * 1000 }'; }
runs() { awk '{ printf "%s%d", (NR > 1 ? " " : ""), $1 * 1000 }' "$WORK/bulk.$1"; }
printf '%-40s %8s %11s  %s\n' path MB/s "vs direct" "runs (MB/s)"
direct=$(mbs direct)
for p in "${BPATHS[@]}"; do
    case $p in
    direct) label="direct loopback (${BULK_MB} MiB)" ;;
    delay) label="tcpdoctor line 1ms (${BULK_MB} MiB)" ;;
    loss) label="tcpdoctor line 1ms,loss=0.1%" ;;
    rate) label="tcpdoctor line 1ms,rate=1gbit" ;;
    wanlink) label="wanlink.py 1ms (${WANLINK_BULK_MB} MiB)" ;;
    esac
    v=$(mbs "$p")
    printf '%-40s %8s %11s  %s\n' "$label" "$v" "$(awk -v a="$v" -v b="$direct" 'BEGIN { printf "%.2f", a / b }')" "$(runs "$p")"
done
delay_mbs=$(mbs delay)
# What the line itself dropped, per path, summed over the runs (from its stderr summary).
awk '/sandbox: path / {
    spec = $0; sub(/.*sandbox: path /, "", spec); sub(/: the line carried.*/, "", spec)
    n = 0; rest = $0
    while (match(rest, /[0-9]+ dropped by/)) { n += substr(rest, RSTART, RLENGTH) + 0; rest = substr(rest, RSTART + RLENGTH) }
    runs[spec]++; drops[spec] += n
} END { for (s in runs) if (s ~ /loss|rate/) printf "   %s: %d runs, %d packets dropped by the line in all\n", s, runs[s], drops[s] }' "$WORK/line.log" | sort
echo
echo "goals:"
gfmt='  %-4s  %-52s %s\n'
ok() { awk "BEGIN { exit !($1) }" && echo PASS || echo MISS; }
printf "$gfmt" "$(ok "$added <= 50")" "added latency p50 <= 50 us (delay 0)" "$added us"
if [ -s "$WORK/pp15" ]; then
    read -r pp50 pp99 <"$WORK/pp15"
    printf "$gfmt" "$(ok "$pp50 <= 20")" "delay error p50 <= 20 us at 15 ms (per packet, devices)" "$pp50 us"
    printf "$gfmt" "$(ok "$pp99 <= 300")" "delay error p99 <= 300 us at 15 ms (per packet, devices)" "$pp99 us"
else
    printf "$gfmt" n/a "delay error at 15 ms (per packet, devices)" "(2b did not run)"
fi
if [ -s "$WORK/st15" ]; then
    read -r st50 st99 <"$WORK/st15"
    printf "$gfmt" "$(ok "$st50 <= 20")" "delay error p50 <= 20 us at 15 ms (per packet, sockets' stamps)" "$st50 us"
    printf "$gfmt" "$(ok "$st99 <= 300")" "delay error p99 <= 300 us at 15 ms (per packet, sockets' stamps)" "$st99 us"
fi
if [ -n "${goal15_50:-}" ]; then
    printf "$gfmt" "info" "delay error p50 at 15 ms (per traversal, sockets)" "$goal15_50 us"
    printf "$gfmt" "info" "delay error p99 at 15 ms (per traversal, sockets)" "$goal15_99 us"
else
    printf "$gfmt" n/a "delay error at 15 ms (per traversal)" "(15 not in DELAYS_MS)"
fi
printf "$gfmt" "$(ok "$delay_mbs >= 1000")" "bulk, delay only, >= 1 GB/s" "$delay_mbs MB/s"
if [ -f "$WORK/bulk.wanlink" ]; then
    w=$(mbs wanlink)
    ratio=$(awk -v a="$delay_mbs" -v b="$w" 'BEGIN { printf "%.2f", a / b }')
    printf "$gfmt" "$(ok "$ratio >= 10")" "bulk, delay only, >= 10x wanlink.py" "${ratio}x ($w MB/s)"
else
    printf "$gfmt" n/a "bulk, delay only, >= 10x wanlink.py" "(wanlink.py skipped)"
fi
