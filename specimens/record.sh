#!/usr/bin/env bash
# shellcheck disable=SC2154 # srv_port, fwd_port, ... are set by spawn/wait_port via printf -v
# record.sh: record the specimen scenarios into testdata/captures/<name>.pcap.
#
#   sudo specimens/record.sh              record every scenario
#   sudo specimens/record.sh NAME...      record only these (see --list)
#   specimens/record.sh --list            list scenario names
#
# Each scenario: start the server(s) (they bind port 0 and print `PORT <n>`; we read that line,
# never sleep), start tcpdump on exactly those ports with packet-buffered, immediate-mode output
# and wait until it prints "listening on", run the client, wait for every specimen process to
# exit, stop tcpdump with SIGINT and wait for it. The specimens' own output (per-exchange
# latencies, summary) goes to testdata/captures/<name>.log; the .expect files quote it.
#
# A recording is kept only if tcpdump reports no kernel drops and every TCP connection in it
# ends with a FIN handshake (its last packet a pure ACK) or a RST, i.e. nothing was lost at the
# tail when tcpdump stopped. Otherwise it is recorded again (at most 3 attempts).
#
# All traffic is to 127.0.0.1. Every process runs under `timeout`, every server exits by itself.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
OUT=$ROOT/testdata/captures
BIN=$HERE/bin
PY=${PYTHON:-python3}
LIMIT=60 # seconds any single process may run

SCENARIOS=(
  nagle_perline_server nagle_perline_server_fixed nagle_perline_server_any
  nagle_perline_server_pcapng fragmented_perline_nodelay slow_server_think40ms
  nagle_wwr_client nagle_wwr_client_fixed nagle_wwr_client_nano
  nagle_middlebox nagle_middlebox_fixed
  churn_conn_per_request churn_fixed_keepalive
  zero_window_slow_reader bulk_fast_reader
  healthy_redis_benchmark healthy_redis_pipelined
)

die() { echo "record.sh: $*" >&2; exit 2; }

# --- process plumbing ---------------------------------------------------------------------

PIDS=()  # everything started by the current scenario
LOG=/dev/null

# spawn VAR cmd...: run cmd in the background with its stdout on a new fd (stored in VAR_fd)
# and its pid in VAR_pid; stderr goes to the scenario log.
spawn() {
  local var=$1 fd; shift
  exec {fd}< <(exec timeout "$LIMIT" "$@" 2>>"$LOG")
  printf -v "${var}_fd" '%s' "$fd"
  printf -v "${var}_pid" '%s' "$!"
  PIDS+=("$!")
}

# wait_port VAR: read the server's readiness line `PORT <n>` into VAR_port.
wait_port() {
  local var=$1 fdvar="${1}_fd" line
  if ! read -r -t 10 line <&"${!fdvar}" || [[ $line != PORT\ * ]]; then
    die "$var did not announce its port (got: '${line:-nothing}')"
  fi
  printf -v "${var}_port" '%s' "${line#PORT }"
}

# wait_exit VAR: wait for a spawned process; copy anything it printed to the log.
wait_exit() {
  local fdvar="${1}_fd" pidvar="${1}_pid"
  cat <&"${!fdvar}" >>"$LOG"
  wait "${!pidvar}" || die "$1 (pid ${!pidvar}) failed: see $LOG"
}

# run_client cmd...: run a client in the foreground, its output into the log.
run_client() {
  echo "\$ ${*#"$HERE"/}" >>"$LOG"
  # redis-benchmark redraws a progress line with \r; keep the log one line per line.
  timeout "$LIMIT" "$@" 2>&1 | tr "\r" "\n" >>"$LOG" || die "client failed: $* (see $LOG)"
}

# Runs when a scenario's subshell exits: ends whatever it started that is still running.
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}

# --- capture ------------------------------------------------------------------------------

# capture_start FILE FILTER tcpdump-options...: start tcpdump, return once it is capturing.
capture_start() {
  local file=$1 filter=$2 line; shift 2
  exec {cap_fd}< <(exec timeout -s INT "$LIMIT" tcpdump -U --immediate-mode "$@" -w "$file" "$filter" 2>&1)
  cap_pid=$!
  cap_tool=tcpdump
  PIDS+=("$cap_pid")
  while read -r -t 10 line <&"$cap_fd"; do
    echo "$line" >>"$LOG"
    [[ $line == *"listening on"* ]] && return 0
  done
  die "tcpdump did not start capturing"
}

# The pcapng variant uses dumpcap, Wireshark's capture engine, which writes pcapng natively.
capture_start_dumpcap() {
  local file=$1 filter=$2 line
  exec {cap_fd}< <(exec timeout -s INT "$LIMIT" dumpcap -q -i lo -f "$filter" -w "$file" 2>&1)
  cap_pid=$!
  cap_tool=dumpcap
  PIDS+=("$cap_pid")
  while read -r -t 10 line <&"$cap_fd"; do
    echo "dumpcap: $line" >>"$LOG"
    [[ $line == *"Capturing on"* ]] && return 0
  done
  die "dumpcap did not start capturing"
}

# capture_stop: SIGINT, wait, and fail if the kernel dropped packets.
capture_stop() {
  local line stats=""
  if [[ $cap_tool == dumpcap ]]; then
    # dumpcap has no immediate mode: the last packets wait in the kernel's ring block until
    # its timeout (250 ms) retires it. dumpcap prints "\rPackets: N" whenever it has read
    # more; stop once it has been silent for a second.
    for _ in {1..60}; do read -r -t 1 -d $'\r' line <&"$cap_fd" || break; done
  fi
  kill -INT "$cap_pid"
  while read -r -t 10 line <&"$cap_fd"; do
    echo "capture: ${line//$'\r'/}" >>"$LOG"
    stats+="$line"$'\n'
  done
  wait "$cap_pid" || true
  if grep -Eq '[1-9][0-9]* packets? dropped by kernel' <<<"$stats"; then
    echo "record.sh: the kernel dropped packets during the capture" >&2
    return 1
  fi
}

# complete FILE: every connection ends with a pure ACK (after its FINs) or a RST.
complete() {
  tshark -r "$1" -T fields -e tcp.stream -e tcp.flags.fin -e tcp.flags.reset -e tcp.len 2>/dev/null |
    awk -F'\t' '{ last[$1] = $0; fin[$1] += ($2 == "1" || $2 == "True") }
      END {
        bad = 0
        for (s in last) {
          split(last[s], f, "\t")
          rst = (f[3] == "1" || f[3] == "True")
          pure_ack = !(f[2] == "1" || f[2] == "True") && f[4] == "0"
          if (!rst && !(fin[s] >= 2 && pure_ack)) { print "stream " s " is cut short"; bad = 1 }
        }
        exit bad
      }' >>"$LOG"
}

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- scenarios ----------------------------------------------------------------------------
# Each sc_<name> records $OUT/<name>.pcap (or .pcapng). Snaplen 256 unless said otherwise:
# truncated captures are the normal case.

lineserver_scenario() { # file mode count capture-options...
  local file=$1 mode=$2 count=$3; shift 3
  spawn srv "$PY" "$HERE/lineserver.py" --mode "$mode" --max-conns 1
  wait_port srv
  capture_start "$file" "tcp port $srv_port" "$@"
  run_client "$PY" "$HERE/lineclient.py" --port "$srv_port" --count "$count"
  wait_exit srv
  capture_stop
}

sc_nagle_perline_server()       { lineserver_scenario "$1" perline 40 -i lo -s 256; }
sc_nagle_perline_server_fixed() { lineserver_scenario "$1" fixed 40 -i lo -s 0; }
sc_nagle_perline_server_any()   { lineserver_scenario "$1" perline 40 -i any -s 256; }
sc_fragmented_perline_nodelay() { lineserver_scenario "$1" perline-nodelay 40 -i lo -s 256; }
sc_slow_server_think40ms()      { lineserver_scenario "$1" think 30 -i lo -s 256; }

sc_nagle_perline_server_pcapng() {
  spawn srv "$PY" "$HERE/lineserver.py" --mode perline --max-conns 1
  wait_port srv
  capture_start_dumpcap "$1" "tcp port $srv_port"
  run_client "$PY" "$HERE/lineclient.py" --port "$srv_port" --count 40
  wait_exit srv
  capture_stop
}

wwr_scenario() { # file client-flag capture-options...
  local file=$1 flag=$2; shift 2
  spawn srv "$PY" "$HERE/wwr_server.py" --max-conns 1
  wait_port srv
  capture_start "$file" "tcp port $srv_port" "$@"
  # shellcheck disable=SC2086 # flag is empty or --fixed
  run_client "$BIN/wwr_client" --port "$srv_port" --count 40 $flag
  wait_exit srv
  capture_stop
}

sc_nagle_wwr_client()       { wwr_scenario "$1" "" -i lo -s 0; }
sc_nagle_wwr_client_fixed() { wwr_scenario "$1" --fixed -i lo -s 256; }
sc_nagle_wwr_client_nano()  { wwr_scenario "$1" "" -i lo -s 256 --time-stamp-precision=nano; }

middlebox_scenario() { # file nagle
  spawn srv "$PY" "$HERE/aio_lineserver.py" --max-conns 1
  wait_port srv
  spawn fwd "$PY" "$HERE/nagle_forwarder.py" --upstream-port "$srv_port" --nagle "$2" --max-conns 1
  wait_port fwd
  # -s 96: the coalesced replies are cut, so payload lengths must come from the IP header.
  capture_start "$1" "tcp port $fwd_port or tcp port $srv_port" -i lo -s 96
  run_client "$PY" "$HERE/lineclient.py" --port "$fwd_port" --count 40
  wait_exit fwd
  wait_exit srv
  capture_stop
}

sc_nagle_middlebox()       { middlebox_scenario "$1" on; }
sc_nagle_middlebox_fixed() { middlebox_scenario "$1" off; }

churn_scenario() { # file max-conns client-flag
  local file=$1 conns=$2 flag=$3
  spawn srv "$PY" "$HERE/lineserver.py" --fixed --max-conns "$conns"
  wait_port srv
  capture_start "$file" "tcp port $srv_port" -i lo -s 256
  # shellcheck disable=SC2086
  run_client "$PY" "$HERE/churn_client.py" --port "$srv_port" --count 120 $flag
  wait_exit srv
  capture_stop
}

sc_churn_conn_per_request() { churn_scenario "$1" 120 ""; }
sc_churn_fixed_keepalive()  { churn_scenario "$1" 1 --fixed; }

bulk_scenario() { # file bytes client-flags...
  local file=$1 bytes=$2; shift 2
  spawn srv "$PY" "$HERE/slow_reader.py" server --bytes "$bytes"
  wait_port srv
  capture_start "$file" "tcp port $srv_port" -i lo -s 96
  run_client "$PY" "$HERE/slow_reader.py" client --port "$srv_port" "$@"
  wait_exit srv
  capture_stop
}

sc_zero_window_slow_reader() { bulk_scenario "$1" $((128 * 1024)); }
sc_bulk_fast_reader()        { bulk_scenario "$1" $((4 * 1024 * 1024)) --fixed; }

redis_scenario() { # file redis-benchmark-options...
  local file=$1 port line; shift
  port=$(free_port) # redis cannot bind port 0; a just-freed port is the closest thing
  exec {redis_fd}< <(exec timeout "$LIMIT" redis-server --port "$port" --bind 127.0.0.1 \
    --save '' --appendonly no --daemonize no 2>&1)
  redis_pid=$!
  PIDS+=("$redis_pid")
  while true; do
    read -r -t 10 line <&"$redis_fd" || die "redis-server did not get ready"
    echo "redis: $line" >>"$LOG"
    [[ $line == *"Ready to accept connections"* ]] && break
  done
  capture_start "$file" "tcp port $port" -i lo -s 256
  run_client redis-benchmark -h 127.0.0.1 -p "$port" -c 4 -t ping,set,get "$@"
  kill -TERM "$redis_pid"
  cat <&"$redis_fd" >>"$LOG"
  wait "$redis_pid" || true
  capture_stop
}

sc_healthy_redis_benchmark() { redis_scenario "$1" -n 300; }
sc_healthy_redis_pipelined() { redis_scenario "$1" -n 1200 -P 8; }

# --- main ---------------------------------------------------------------------------------

capture_path() { # scenario name -> file; the dumpcap scenario writes pcapng
  if [[ $1 == *_pcapng ]]; then echo "$OUT/$1.pcapng"; else echo "$OUT/$1.pcap"; fi
}

record() {
  local name=$1 file attempt
  file=$(capture_path "$name")
  LOG=$OUT/$name.log
  for attempt in 1 2 3; do
    : >"$LOG"
    if ( trap cleanup EXIT; "sc_$name" "$file" ) && complete "$file"; then
      chmod 644 "$file"
      echo "recorded $name: ${file#"$ROOT"/} ($(stat -c %s "$file") bytes), specimen output in ${LOG#"$ROOT"/}"
      return 0
    fi
    echo "record.sh: $name attempt $attempt failed or incomplete, recording again; its log ends:" >&2
    tail -n 3 "$LOG" | sed 's/^/    /' >&2
  done
  die "$name: no complete recording after 3 attempts"
}

case "${1:-}" in
  --list) printf '%s\n' "${SCENARIOS[@]}"; exit 0 ;;
  -h | --help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; exit 0 ;;
esac
[[ $(id -u) == 0 ]] || die "needs root to capture on the loopback interface: run 'sudo $0 $*'"
for tool in tcpdump tshark dumpcap cc redis-server redis-benchmark timeout; do
  command -v "$tool" >/dev/null || die "needs $tool on PATH"
done
mkdir -p "$OUT" "$BIN"
cc -O2 -Wall -o "$BIN/wwr_client" "$HERE/wwr_client.c"

names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=("${SCENARIOS[@]}")
for name in "${names[@]}"; do
  [[ " ${SCENARIOS[*]} " == *" $name "* ]] || die "unknown scenario '$name' (see --list)"
  record "$name"
done
