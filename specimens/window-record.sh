#!/usr/bin/env bash
# window-record.sh: record the window_limited reference captures in testdata/captures/
# (window_sndbuf, window_rcvbuf, window_default) through specimens/wanlink.py: one bulk
# response from wan_bulk.py over a 20 ms RTT (--delay 10ms), captured at the client.
#
#   sudo specimens/window-record.sh                 # all three
#   sudo specimens/window-record.sh window_sndbuf   # only the named ones
#   OUT=/tmp/caps specimens/window-record.sh        # somewhere else
#
# Each writes <name>.pcap (tcpdump -s 96 on tun0: raw IP; headers only, the captures stay
# small) and <name>.log (the client's and wanlink's output). The .expect files are written by
# hand from PHYSICS.md §7 and tshark, like the other captures: re-check their figures after a
# re-recording. Needs root (network namespaces, TUN, tcpdump), ip, tcpdump, python3. Traffic
# stays inside the two namespaces wanlink creates (198.18.0.1 and 198.18.0.2).
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "window-record.sh: must run as root (network namespaces, TUN devices, tcpdump)" >&2
    exit 2
fi
for tool in ip tcpdump python3; do
    command -v "$tool" >/dev/null || { echo "window-record.sh: $tool not found" >&2; exit 2; }
done

here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/../testdata/captures}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$here"
selected=("$@")

want() {
    [ "${#selected[@]}" -eq 0 ] && return 0
    local s
    for s in "${selected[@]}"; do [ "$s" = "$1" ] && return 0; done
    return 1
}

record() {  # name server-command client-command
    local name=$1 server=$2 client=$3
    want "$name" || return 0
    echo "== $name"
    rm -f "$out/$name.pcap" "$out/$name.log"
    if ! timeout 120 python3 wanlink.py --delay 10ms --capture-side client --snaplen 96 \
            --capture "$out/$name.pcap" --server "$server" --client "$client" \
            >"$out/$name.log" 2>&1; then
        cat "$out/$name.log" >&2
        echo "window-record.sh: wanlink failed for $name" >&2
        exit 1
    fi
    grep -E '^exchange|so_(snd|rcv)buf|delay accuracy' "$out/$name.log" | sed 's/^/   /'
}

C=198.18.0.1
# The server sets SO_SNDBUF 32 KiB on the accepted socket (the kernel doubles it to 64 KiB).
record window_sndbuf "python3 wan_bulk.py server --sndbuf 32768" \
    "python3 wan_bulk.py client $C 7070 --count 1 --bytes 1048576"
# The client sets SO_RCVBUF 32 KiB before connect() (64 KiB; ~38 KiB advertised).
record window_rcvbuf "python3 wan_bulk.py server" \
    "python3 wan_bulk.py client $C 7070 --count 1 --bytes 1048576 --rcvbuf 32768"
# Default buffers (autotuning), a 4 MiB response: slow start to the end.
record window_default "python3 wan_bulk.py server" \
    "python3 wan_bulk.py client $C 7070 --count 1 --bytes 4194304"
ls -l "$out"/window_*.pcap
