#!/usr/bin/env bash
# record-lang.sh: record the other-language specimens (lang_*) and the real products (real_*)
# into testdata/captures/<name>.pcap, with what the programs printed in <name>.log.
#
#   sudo specimens/lang/record-lang.sh              record every scenario (~1 min)
#   sudo specimens/lang/record-lang.sh NAME...      only these (see --list)
#   specimens/lang/record-lang.sh --list
#
# The .expect files are NOT written here: they are written by hand from PHYSICS.md and from
# what the programs measured, and checked with tshark (specimens/inspect_capture.py). After a
# re-recording, update the figures quoted in each .expect from the new .log and tshark.
#
# Needs root (tcpdump on lo; network namespaces for the WAN ones; postgres runs as the
# `postgres` user), and: javac java go node cc python3 tcpdump tshark nginx wrk ab curl memcached
# redis-server redis-benchmark pgbench initdb pg_ctl (Debian: openjdk-17-jdk-headless nodejs
# nginx-light wrk apache2-utils memcached redis-server postgresql; Go from go.dev).
#
# The Java, Go and C programs are built into a temporary directory, removed at exit.
# Loopback scenarios: the server announces `PORT <n>` (or, for the real products, we wait until
# its port is listening or it prints its readiness line; never a fixed sleep), tcpdump starts on
# exactly that port and we wait for "listening on", the client runs, everything is stopped,
# tcpdump gets SIGINT. A recording is kept only if tcpdump dropped nothing and every connection
# ends in a FIN handshake or a RST (else it is recorded again, 3 attempts at most).
# WAN scenarios run through specimens/wanlink.py (namespaces with 198.18.0.1/198.18.0.2).
# Traffic goes only to 127.0.0.1, ::1 and those namespaces. Every process runs under `timeout`.
# shellcheck disable=SC2154 # srv_port, nginx_pid, ... are set by spawn/wait_port via printf -v
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SPEC=$(dirname "$HERE")
ROOT=$(dirname "$SPEC")
OUT=${OUT:-$ROOT/testdata/captures}
PY=${PYTHON:-python3}
LIMIT=60 # seconds any single process may run

SCENARIOS=(
  lang_java_perline_server lang_java_perline_server_fixed
  lang_go_perline_nodelay lang_go_perline_nagle
  lang_node_perline_server lang_node_perline_nodelay
  lang_c_http_wwr_client lang_c_http_wwr_client_fixed
  real_nginx_wrk_keepalive real_nginx_ab_churn
  real_python_httpserver_keepalive real_python_httpserver_http10_churn real_nginx_proxy_upstream_churn
  real_nginx_curl_ratelimited
  real_memcached_sequential real_postgres_pgbench_select real_redis_ipv6_benchmark
  real_redis_wan10ms_c1 real_redis_wan10ms_pipelined16
  real_python_httpserver_wan10ms real_nginx_wan10ms_bulk
)

die() { echo "record-lang.sh: $*" >&2; exit 2; }

case "${1:-}" in
  --list) printf '%s\n' "${SCENARIOS[@]}"; exit 0 ;;
  -h | --help) sed -n '2,26p' "$0"; exit 0 ;;
esac
[[ $(id -u) == 0 ]] || die "needs root (tcpdump, network namespaces, the postgres user): run 'sudo $0 $*'"
for tool in javac java go node cc "$PY" tcpdump tshark nginx wrk ab curl memcached redis-server \
  redis-benchmark pgbench initdb pg_ctl runuser timeout ss ip; do
  command -v "$tool" >/dev/null || die "needs $tool on PATH"
done
# Debian keeps initdb/pg_ctl off PATH; /usr/lib/postgresql/<v>/bin has them.
PGBIN=$(dirname "$(readlink -f "$(command -v pg_ctl)")")

BIN=$(mktemp -d /tmp/record-lang.XXXXXX)
chmod 755 "$BIN"
trap 'rm -rf "$BIN"' EXIT
javac -d "$BIN" "$HERE/PerLineServer.java"
(cd "$HERE" && go build -o "$BIN/go_lineserver" go_lineserver.go &&
  go build -o "$BIN/go_httpserver" go_httpserver.go)
cc -O2 -Wall -o "$BIN/http_wwr_client" "$HERE/http_wwr_client.c"
mkdir -p "$OUT"

# --- process plumbing (as in specimens/record.sh) ------------------------------------------

PIDS=()
ON_EXIT=() # extra shell commands a scenario needs run when it ends, however it ends
LOG=/dev/null

# spawn VAR cmd...: background process, stdout on fd VAR_fd, pid in VAR_pid, stderr to the log.
spawn() {
  local var=$1 fd; shift
  exec {fd}< <(exec timeout "$LIMIT" "$@" 2>>"$LOG")
  printf -v "${var}_fd" '%s' "$fd"
  printf -v "${var}_pid" '%s' "$!"
  PIDS+=("$!")
}

# wait_port VAR: read the readiness line `PORT <n>` into VAR_port.
wait_port() {
  local var=$1 fdvar="${1}_fd" line
  if ! read -r -t 20 line <&"${!fdvar}" || [[ $line != PORT\ * ]]; then
    die "$var did not announce its port (got: '${line:-nothing}')"
  fi
  printf -v "${var}_port" '%s' "${line#PORT }"
}

# wait_line VAR REGEX: read VAR's stdout until a line matches (copying it to the log).
wait_line() {
  local fdvar="${1}_fd" line
  while read -r -t 20 line <&"${!fdvar}"; do
    echo "$1: $line" >>"$LOG"
    [[ $line =~ $2 ]] && return 0
  done
  die "$1 never printed a line matching '$2'"
}

# wait_listening PORT: poll the kernel's table of listening sockets (no connection is made).
wait_listening() {
  local _
  for _ in $(seq 400); do
    [[ -n $(ss -Hltn "sport = :$1") ]] && return 0
    sleep 0.05
  done
  die "nothing listens on port $1 after 20 s"
}

wait_exit() {
  local fdvar="${1}_fd" pidvar="${1}_pid"
  cat <&"${!fdvar}" >>"$LOG"
  wait "${!pidvar}" || die "$1 (pid ${!pidvar}) failed: see $LOG"
}

run_client() {
  echo "\$ ${*#"$BIN"/}" >>"$LOG"
  timeout "$LIMIT" "$@" 2>&1 | tr "\r" "\n" >>"$LOG" || die "client failed: $* (see $LOG)"
}

cleanup() {
  local p c
  for c in "${ON_EXIT[@]}"; do eval "$c" || true; done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}

# stop VAR: SIGTERM a spawned server and wait for it, whatever its exit status.
stop() {
  local fdvar="${1}_fd" pidvar="${1}_pid"
  kill -TERM "${!pidvar}" 2>/dev/null || true
  cat <&"${!fdvar}" >>"$LOG"
  wait "${!pidvar}" || true
}

capture_start() { # file filter tcpdump-options...
  local file=$1 filter=$2 line; shift 2
  exec {cap_fd}< <(exec timeout -s INT "$LIMIT" tcpdump -U --immediate-mode "$@" -w "$file" "$filter" 2>&1)
  cap_pid=$!
  PIDS+=("$cap_pid")
  while read -r -t 10 line <&"$cap_fd"; do
    echo "$line" >>"$LOG"
    [[ $line == *"listening on"* ]] && return 0
  done
  die "tcpdump did not start capturing"
}

capture_stop() {
  local line stats=""
  kill -INT "$cap_pid"
  while read -r -t 10 line <&"$cap_fd"; do
    echo "capture: $line" >>"$LOG"
    stats+="$line"$'\n'
  done
  wait "$cap_pid" || true
  if grep -Eq '[1-9][0-9]* packets? dropped by kernel' <<<"$stats"; then
    echo "record-lang.sh: the kernel dropped packets during the capture" >&2
    return 1
  fi
}

complete() { # every connection ends with a pure ACK after both FINs, or with a RST
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

free_port() { # free_port [ADDR]: a port just free on ADDR (for servers that cannot bind port 0)
  "$PY" -c 'import socket, sys
a = sys.argv[1]; s = socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET)
s.bind((a, 0)); print(s.getsockname()[1])' "${1:-127.0.0.1}"
}

# --- language specimens: server in Java/Go/Node, client specimens/lineclient.py -------------

lineserver_scenario() { # file count server-command...
  local file=$1 count=$2; shift 2
  spawn srv "$@"
  wait_port srv
  capture_start "$file" "tcp port $srv_port" -i lo -s 256
  run_client "$PY" "$SPEC/lineclient.py" --port "$srv_port" --count "$count"
  wait_exit srv
  capture_stop
}

sc_lang_java_perline_server()       { lineserver_scenario "$1" 40 java -cp "$BIN" PerLineServer --mode perline; }
sc_lang_java_perline_server_fixed() { lineserver_scenario "$1" 40 java -cp "$BIN" PerLineServer --mode fixed; }
sc_lang_go_perline_nodelay()        { lineserver_scenario "$1" 40 "$BIN/go_lineserver" -mode perline; }
sc_lang_go_perline_nagle()          { lineserver_scenario "$1" 40 "$BIN/go_lineserver" -mode perline -nagle; }
sc_lang_node_perline_server()       { lineserver_scenario "$1" 40 node "$HERE/node_lineserver.js"; }
sc_lang_node_perline_nodelay()      { lineserver_scenario "$1" 40 node "$HERE/node_lineserver.js" --nodelay; }

http_wwr_scenario() { # file client-flag...
  local file=$1; shift
  spawn srv "$BIN/go_httpserver" -max-conns 1
  wait_port srv
  capture_start "$file" "tcp port $srv_port" -i lo -s 256
  run_client "$BIN/http_wwr_client" --port "$srv_port" --count 40 "$@"
  wait_exit srv
  capture_stop
}

sc_lang_c_http_wwr_client()       { http_wwr_scenario "$1"; }
sc_lang_c_http_wwr_client_fixed() { http_wwr_scenario "$1" --fixed; }

# --- real products on loopback -------------------------------------------------------------

# nginx_conf DIR ADDR:PORT: a throwaway nginx config (not the system service) serving DIR/www.
# sendfile/tcp_nopush/tcp_nodelay as in Debian's stock nginx.conf.
nginx_conf() { # DIR ADDR:PORT [server-block directives]
  local dir=$1 listen=$2 extra=${3:-}
  mkdir -p "$dir/www" "$dir/tmp"
  "$PY" -c 'import sys; sys.stdout.write("".join("<p>line %03d of a small static page</p>\n" % i for i in range(16)))' \
    >"$dir/www/small.html"
  chmod -R a+rX "$dir"
  cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 64; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 5s;
  types { text/html html; application/octet-stream bin; }
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  server {
    listen $listen;
    root $dir/www;
    $extra
  }
}
EOF
}

nginx_start() { # DIR PORT [directives]: run it on 127.0.0.1:PORT and wait until it listens
  nginx_conf "$1" "127.0.0.1:$2" "${3:-}"
  spawn nginx nginx -p "$1" -c "$1/nginx.conf" -e "$1/error.log"
  wait_listening "$2"
}

nginx_stop() {
  stop nginx
  cat "$1/error.log" >>"$LOG" 2>/dev/null || true
}

sc_real_nginx_wrk_keepalive() {
  local dir port
  dir=$(mktemp -d /tmp/record-lang-nginx.XXXXXX)
  ON_EXIT+=("rm -rf '$dir'")
  port=$(free_port)
  nginx_start "$dir" "$port"
  # wrk has no request count: this script stops its (one) thread after 120 responses, so the
  # capture stays small; -d 2s bounds it anyway.
  cat >"$dir/stop.lua" <<'EOF'
local n = 0
function response(status, headers, body)
  n = n + 1
  if n >= 120 then wrk.thread:stop() end
end
EOF
  capture_start "$1" "tcp port $port" -i lo -s 256
  run_client wrk -t 1 -c 4 -d 2s --latency -s "$dir/stop.lua" "http://127.0.0.1:$port/small.html"
  nginx_stop "$dir"
  capture_stop
}

sc_real_nginx_ab_churn() {
  local dir port
  dir=$(mktemp -d /tmp/record-lang-nginx.XXXXXX)
  ON_EXIT+=("rm -rf '$dir'")
  port=$(free_port)
  nginx_start "$dir" "$port"
  capture_start "$1" "tcp port $port" -i lo -s 256
  run_client ab -n 80 -c 1 "http://127.0.0.1:$port/small.html" # no -k: a connection per request
  nginx_stop "$dir"
  capture_stop
}

# CPython's own http.server (python3 -m http.server) serving the same small page, and curl
# fetching it 40 times with one command (URL globbing: curl reuses its connection when the
# server keeps it open). -p HTTP/1.1 turns keep-alive on; the default HTTP/1.0 closes after
# each response.
python_httpserver_scenario() { # file protocol
  local dir line port
  dir=$(mktemp -d /tmp/record-lang-httpserver.XXXXXX)
  ON_EXIT+=("rm -rf '$dir'")
  "$PY" -c 'import sys; sys.stdout.write("".join("<p>line %03d of a small static page</p>\n" % i for i in range(16)))' \
    >"$dir/small.html"
  spawn srv "$PY" -u -m http.server -b 127.0.0.1 -p "$2" -d "$dir" 0
  read -r -t 20 line <&"$srv_fd" || die "http.server did not start"
  echo "http.server: $line" >>"$LOG"
  [[ $line =~ port\ ([0-9]+) ]] || die "no port in '$line'"
  port=${BASH_REMATCH[1]}
  capture_start "$1" "tcp port $port" -i lo -s 256
  run_client curl -sS -o /dev/null -w 'exchange %{url_effective} total %{time_total} s connect %{time_connect} s\n' \
    "http://127.0.0.1:$port/small.html?n=[1-40]"
  stop srv
  capture_stop
}

sc_real_python_httpserver_keepalive()   { python_httpserver_scenario "$1" HTTP/1.1; }
sc_real_python_httpserver_http10_churn() { python_httpserver_scenario "$1" HTTP/1.0; }

# nginx as a reverse proxy in front of CPython's http.server, with nginx's default upstream
# settings (proxy_http_version 1.0, no upstream keepalive): the client keeps one connection to
# nginx, nginx opens a new upstream connection for every request. Both legs are captured.
sc_real_nginx_proxy_upstream_churn() {
  local dir line up port
  dir=$(mktemp -d /tmp/record-lang-nginx.XXXXXX)
  ON_EXIT+=("rm -rf '$dir'")
  mkdir -p "$dir/up"
  "$PY" -c 'import sys; sys.stdout.write("".join("<p>line %03d of a small static page</p>\n" % i for i in range(16)))' \
    >"$dir/up/small.html"
  spawn up "$PY" -u -m http.server -b 127.0.0.1 -d "$dir/up" 0
  read -r -t 20 line <&"$up_fd" || die "http.server did not start"
  echo "upstream http.server: $line" >>"$LOG"
  [[ $line =~ port\ ([0-9]+) ]] || die "no port in '$line'"
  up=${BASH_REMATCH[1]}
  port=$(free_port)
  nginx_start "$dir" "$port" "location / { proxy_pass http://127.0.0.1:$up; }"
  capture_start "$1" "tcp port $port or tcp port $up" -i lo -s 256
  run_client curl -sS -o /dev/null -w 'exchange %{url_effective} total %{time_total} s connect %{time_connect} s\n' \
    "http://127.0.0.1:$port/small.html?n=[1-30]"
  nginx_stop "$dir"
  stop up
  capture_stop
}

# A slow reader: curl --limit-rate downloading 300 KB from nginx at 100 KB/s. curl reads only
# as fast as its limit allows, its receive buffer fills and it advertises a zero window.
sc_real_nginx_curl_ratelimited() {
  local dir port
  dir=$(mktemp -d /tmp/record-lang-nginx.XXXXXX)
  ON_EXIT+=("rm -rf '$dir'")
  port=$(free_port)
  mkdir -p "$dir/www"
  head -c 307200 /dev/urandom >"$dir/www/big.bin"
  nginx_start "$dir" "$port"
  capture_start "$1" "tcp port $port" -i lo -s 256
  run_client curl -sS -o /dev/null --limit-rate 100K \
    -w 'exchange %{url_effective} total %{time_total} s first-byte %{time_starttransfer} s size %{size_download}\n' \
    "http://127.0.0.1:$port/big.bin"
  nginx_stop "$dir"
  capture_stop
}

sc_real_memcached_sequential() {
  local port
  port=$(free_port)
  spawn mc memcached -u root -l 127.0.0.1 -p "$port" -U 0 -t 1 -m 16
  wait_listening "$port"
  capture_start "$1" "tcp port $port" -i lo -s 256
  run_client "$PY" "$HERE/mc_client.py" --port "$port" --count 25
  stop mc
  capture_stop
}

sc_real_postgres_pgbench_select() {
  local dir port
  dir=$(mktemp -d /tmp/record-lang-pg.XXXXXX)
  port=$(free_port)
  chown postgres: "$dir"
  runuser -u postgres -- "$PGBIN/initdb" -D "$dir/data" -A trust -U postgres --no-sync >>"$LOG" 2>&1
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
    -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c fsync=off" start >>"$LOG"
  ON_EXIT+=("runuser -u postgres -- '$PGBIN/pg_ctl' -D '$dir/data' -m fast stop >/dev/null 2>&1; rm -rf '$dir'")
  timeout "$LIMIT" pgbench -h 127.0.0.1 -p "$port" -U postgres -i -s 1 -q postgres >>"$LOG" 2>&1
  capture_start "$1" "tcp port $port" -i lo -s 256
  # -t, not -T: 30 transactions per client keeps the capture small; -n: no vacuum first.
  run_client pgbench -h 127.0.0.1 -p "$port" -U postgres -S -n -c 2 -t 30 -r postgres
  # Stop the server before the capture: pgbench exits as soon as it has sent Terminate, and
  # the backends' FINs follow a few ms later; pg_ctl stop returns once they are all gone.
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$dir/data" -m fast stop >>"$LOG"
  capture_stop
  cat "$dir/server.log" >>"$LOG"
}

sc_real_redis_ipv6_benchmark() {
  local port
  port=$(free_port ::1)
  spawn redis redis-server --port "$port" --bind ::1 --save '' --appendonly no --daemonize no
  wait_line redis 'Ready to accept connections'
  capture_start "$1" "tcp port $port" -i lo -s 256
  run_client redis-benchmark -h ::1 -p "$port" -c 4 -t set,get -n 300
  stop redis
  capture_stop
}

# --- real products over a WAN path (specimens/wanlink.py; not retried, wanlink checks itself) ---

wan_redis() { # file wanlink-delay redis-benchmark-options...
  local file=$1 delay=$2; shift 2
  (cd "$SPEC" && timeout 120 "$PY" wanlink.py --delay "$delay" --capture-side client --capture "$file" \
    --ready 'Ready to accept connections' \
    --server "redis-server --bind 198.18.0.1 --port 7070 --protected-mode no --save '' --appendonly no --daemonize no" \
    --client "redis-benchmark -h 198.18.0.1 -p 7070 $*") 2>&1 | tr "\r" "\n" >>"$LOG"
}

sc_real_redis_wan10ms_c1()          { wan_redis "$1" 10ms -c 1 -n 300 -t get; }
sc_real_redis_wan10ms_pipelined16() { wan_redis "$1" 10ms -c 1 -n 300 -t get -P 16; }

# CPython's http.server with keep-alive (see real_python_httpserver_keepalive) over the same
# 20 ms RTT: curl fetches the small page 20 times on one connection.
sc_real_python_httpserver_wan10ms() {
  local dir
  dir=$(mktemp -d /tmp/record-lang-httpserver.XXXXXX)
  ON_EXIT+=("rm -rf '$dir'")
  "$PY" -c 'import sys; sys.stdout.write("".join("<p>line %03d of a small static page</p>\n" % i for i in range(16)))' \
    >"$dir/small.html"
  chmod -R a+rX "$dir"
  (cd "$SPEC" && timeout 120 "$PY" wanlink.py --delay 10ms --capture-side client --capture "$1" \
    --ready 'Serving HTTP' \
    --server "$(command -v "$PY") -u -m http.server -b 198.18.0.1 -p HTTP/1.1 -d $dir 7070" \
    --client "curl -sS -o /dev/null -w 'exchange %{url_effective} total %{time_total} s connect %{time_connect} s\n' 'http://198.18.0.1:7070/small.html?n=[1-20]'") \
    2>&1 | tr "\r" "\n" >>"$LOG"
}

# nginx sending two 400 KB files over one keep-alive connection across the 20 ms RTT: bulk
# transfer, slow start, nothing wrong. nginx does not announce readiness: the server command
# polls for its listening socket inside the namespace, then prints LISTENING.
sc_real_nginx_wan10ms_bulk() {
  local dir
  dir=$(mktemp -d /tmp/record-lang-nginx.XXXXXX)
  ON_EXIT+=("rm -rf '$dir'")
  nginx_conf "$dir" 198.18.0.1:7070
  head -c 409600 /dev/urandom >"$dir/www/big.bin"
  chmod a+r "$dir/www/big.bin"
  (cd "$SPEC" && timeout 120 "$PY" wanlink.py --delay 10ms --capture-side client --capture "$1" \
    --server "nginx -p $dir -c $dir/nginx.conf -e $dir/error.log & for _ in \$(seq 200); do ss -Hltn 'sport = :7070' | grep -q . && break; sleep 0.05; done; echo LISTENING; wait" \
    --client "curl -sS -o /dev/null -w 'exchange %{url_effective} total %{time_total} s first-byte %{time_starttransfer} s size %{size_download}\n' 'http://198.18.0.1:7070/big.bin?n=[1-2]'") \
    2>&1 | tr "\r" "\n" >>"$LOG"
}

# --- main -----------------------------------------------------------------------------------

record() {
  local name=$1 file=$OUT/$1.pcap attempt
  LOG=$OUT/$name.log
  for attempt in 1 2 3; do
    : >"$LOG"
    if ( trap cleanup EXIT; "sc_$name" "$file" ) && complete "$file"; then
      chmod 644 "$file" "$LOG"
      echo "recorded $name: ${file#"$ROOT"/} ($(stat -c %s "$file") bytes), log ${LOG#"$ROOT"/}"
      return 0
    fi
    echo "record-lang.sh: $name attempt $attempt failed or incomplete; its log ends:" >&2
    tail -n 3 "$LOG" | sed 's/^/    /' >&2
  done
  die "$name: no complete recording after 3 attempts"
}

names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=("${SCENARIOS[@]}")
for name in "${names[@]}"; do
  [[ " ${SCENARIOS[*]} " == *" $name "* ]] || die "unknown scenario '$name' (see --list)"
  record "$name"
done
