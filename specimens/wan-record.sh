#!/usr/bin/env bash
# wan-record.sh: record the WAN reference captures in testdata/captures/ with
# specimens/wanlink.py (userspace delay/loss between two network namespaces),
# check each one (wan_check.py) and write its .expect file and its .log (the client's and
# wanlink's output during that recording).
#
#   sudo specimens/wan-record.sh                 # all captures
#   sudo specimens/wan-record.sh wan_tlp_only    # only the named ones
#   OUT=/tmp/caps specimens/wan-record.sh        # somewhere else
#
# Needs root (network namespaces, TUN devices, tcpdump), ip, tcpdump, tshark,
# python3. Traffic stays inside the two namespaces it creates (198.18.0.1 and
# 198.18.0.2); they are deleted again whatever happens.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "wan-record.sh: must run as root (it creates network namespaces and TUN devices" \
         "and runs tcpdump)" >&2
    exit 2
fi
for tool in ip tcpdump tshark python3; do
    command -v "$tool" >/dev/null || { echo "wan-record.sh: $tool not found" >&2; exit 2; }
done
[ -c /dev/net/tun ] || { echo "wan-record.sh: /dev/net/tun missing" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/../testdata/captures}
mkdir -p "$out"
out=$(cd "$out" && pwd)
logs=$(mktemp -d /tmp/wan-record.XXXXXX)
trap 'rm -rf "$logs"' EXIT
cd "$here"    # the server/client commands below are relative to specimens/

want() {  # is capture $1 selected on the command line (or are all)?
    [ "${#selected[@]}" -eq 0 ] && return 0
    local s
    for s in "${selected[@]}"; do [ "$s" = "$1" ] && return 0; done
    return 1
}
selected=("$@")

record() {  # name side delay drops server-command client-command
    local name=$1 side=$2 delay=$3 drops=$4 server=$5 client=$6
    want "$name" || return 0
    local args=(--delay "$delay" --capture-side "$side" --capture "$out/$name.pcap"
                --server "$server" --client "$client")
    [ -n "$drops" ] && args+=(--drop "$drops")
    echo "== $name: delay $delay, ${drops:-no drops}, captured at the $side"
    rm -f "$out/$name.pcap" "$out/$name.expect" "$out/$name.log"
    if ! python3 wanlink.py "${args[@]}" >"$logs/$name.client" 2>"$logs/$name.wanlink"; then
        cat "$logs/$name.wanlink" "$logs/$name.client" >&2
        echo "wan-record.sh: wanlink failed for $name" >&2
        exit 1
    fi
    # the run's own output, which the .expect comments quote: client first, then wanlink's
    # (server, tcpdump and link) lines
    cat "$logs/$name.client" "$logs/$name.wanlink" >"$out/$name.log"
    grep -E '^summary|^connected' "$logs/$name.client" | sed 's/^/   client: /'
    grep -E '^wanlink: (drop|delay accuracy)' "$logs/$name.wanlink" | sed 's/^/   /'
    local cmd="wanlink.py --delay $delay${drops:+ --drop $drops} --capture-side $side"
    cmd+=" --server '$server' --client '$client'"
    if ! python3 wan_check.py "$name" --pcap "$out/$name.pcap" --client-log "$logs/$name.client" \
            --wanlink-log "$logs/$name.wanlink" --cmd "$cmd"; then
        cat "$logs/$name.wanlink" "$logs/$name.client" >&2
        exit 1
    fi
}

C=198.18.0.1   # the server's address, as the client in namespace B sees it

# Nagle x delayed ACK over a 30 ms RTT, seen from both ends
record wan15ms_nagle_perline client 15ms "" \
    "python3 wan_perline_server.py" "python3 wan_client.py $C 7070 --count 30 --stall-ms 80"
record wan15ms_nagle_perline_serverside server 15ms "" \
    "python3 wan_perline_server.py" "python3 wan_client.py $C 7070 --count 30 --stall-ms 80"
# the fixed server: one RTT per exchange
record wan15ms_fixed client 15ms "" \
    "python3 wan_fixed_server.py" "python3 wan_client.py $C 7070 --count 30"
# a chatty client, then the same commands pipelined
record wan15ms_rtt_bound client 15ms "" \
    "python3 wan_fixed_server.py" "python3 wan_client.py $C 7070 --count 80 --verb SET"
record wan15ms_pipelined client 15ms "" \
    "python3 wan_fixed_server.py" "python3 wan_pipelined_client.py $C 7070 --count 80 --verb SET"
# a client that keeps a window of 4 requests in flight: overlapped exchanges, not sequential
record wan15ms_window4 client 15ms "" "python3 wan_fixed_server.py --nodelay" \
    "python3 wan_pipelined_client.py $C 7070 --count 80 --verb SET --window 4 --spacing-ms 7.5"
# a real browser's HTTP/1.1 pool (headless Chromium, six keep-alive connections) and nginx
record wan15ms_browser_pool client 15ms "" "python3 browser_pool.py server" \
    "python3 browser_pool.py client $C 7070"
# Nagle without delayed ACK (PHYSICS sec. 9): a 20-byte header send(), then a body of one
# full segment + 60 bytes; the tail waits one RTT for the client's immediate ACK. Seen from
# both ends; then the fixed twin (header + body in one send()). stalled = > 1.5 RTT.
record wan15ms_nagle_header_body_serverside server 15ms "" \
    "python3 wan_header_body_server.py" "python3 wan_client.py $C 7070 --count 30 --stall-ms 45"
record wan15ms_nagle_header_body_clientside client 15ms "" \
    "python3 wan_header_body_server.py" "python3 wan_client.py $C 7070 --count 30 --stall-ms 45"
record wan15ms_header_body_fixed client 15ms "" \
    "python3 wan_header_body_server.py --fixed" \
    "python3 wan_client.py $C 7070 --count 30 --stall-ms 45"
# losses, 4 ms RTT. Each 2000-byte response is 2 segments, so s2c data packet
# #8 is the tail of response 4; x2 also drops its first retransmission (the TLP).
record wan_rto_stall server 2ms "s2c:8x2" \
    "python3 wan_bulk.py server" "python3 wan_bulk.py client $C 7070 --count 6 --bytes 2000"
record wan_tlp_only server 2ms "s2c:8" \
    "python3 wan_bulk.py server" "python3 wan_bulk.py client $C 7070 --count 6 --bytes 2000"
# the first SYN lost: connect() waits for the 1 s initial RTO
record wan_syn_retry client 5ms "c2s:syn:1" \
    "python3 wan_fixed_server.py" "python3 wan_client.py $C 7070 --count 3"

ls -l "$out"/wan*.pcap
