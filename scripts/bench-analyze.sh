#!/usr/bin/env bash
# bench-analyze.sh — how fast `tcpdoctor analyze` reads a big capture, against tshark.
#
# What it measures: wall time, packets/s, MB/s and peak RSS of
#     tcpdoctor analyze --format json F > /dev/null     (3 runs, the median is reported)
#     tshark -r F -q -z conv,tcp > /dev/null             (1 run: it is slow)
# on the same file F, in the same run, page cache warmed first (`cat F > /dev/null`), each timed
# with `/usr/bin/time -f '%e %M %U %S'`. F is >= 1 GiB of loopback TCP with many flows and small
# segments, made from real traffic:
#   1. a redis-server on a free port of 127.0.0.1, started and stopped by this script, is recorded
#      with `tcpdump -i lo -s 0` while
#        redis-benchmark -q -n 50000 -c 50 -t ping,set,get -d 64   (50 keep-alive clients a test)
#        redis-benchmark -q -n 2000 -c 10 -k 0 -t ping              (a new connection per request)
#      run against it: the seed, ~45 MB, ~4,200 connections (or --seed FILE: any pcap);
#   2. scripts/pcap-replicate.c (compiled here with cc -O2) writes the seed again and again until
#      F reaches the size: copy k moves every flow's client to its own address (127.0.k.1, ...),
#      fixes the IPv4 and TCP checksums incrementally, and shifts the timestamps by k × (the seed's
#      span + 10 ms), so the copies are distinct flows that follow one another in time. tshark
#      reads the result without a warning (the script prints anything tshark says on stderr).
# It then cross-checks frames and flows (generator vs tcpdoctor vs tshark's conversations).
#
# The same file is also analysed with every core (`--threads $(nproc)`, as many runs, each
# paired with a one-thread run, so that both see the same spells of a shared machine), checking
# that the report is byte-identical to the single thread's; after each pair, $(nproc)
# one-thread runs at once say what the machine's cores give (on a VM whose vCPUs share a
# physical core, less than $(nproc)x, and then no division of the work can reach it).
# Goals, each printed as PASS or MISS: tcpdoctor >= 500 MB/s on one thread, >= 50x faster than
# tshark on one thread and with all cores (tshark uses one), peak RSS < 200 MB, all cores >= 1.7x
# one thread — with the evidence audit on (it always is: it re-reads only the frames findings
# cite; the `evidence audit` line says what it read). A gzip-compressed copy (gzip -1) is then
# timed once against `zcat F.gz > /dev/null`, the decompression ceiling, at one thread and at all
# cores. MB = 10^6 bytes throughout. The script exits 0 whatever the figures (a benchmark, not a
# test); non-zero only if a step failed.
#
# Run (as root: tcpdump needs it; ~4 min at 1 GiB on 2 cores, most of it tshark; tshark needs
# ~6 GB of memory at 1 GiB):
#     scripts/bench-analyze.sh                 # 1 GiB
#     scripts/bench-analyze.sh --quick         # 100 MiB: a sanity run in well under a minute
#     scripts/bench-analyze.sh --size 2GiB --keep
# Options: --size N[K|M|G|KiB|MiB|GiB|KB|MB|GB]  --quick  --keep (keep /tmp/tcpdoctor-bench)
#          --runs N (tcpdoctor runs, default 3)  --seed FILE.pcap (replicate FILE, record nothing)
#          --requests N (redis-benchmark -n of the keep-alive part, default 50000)  --no-tshark
# Files go to /tmp/tcpdoctor-bench, deleted at the end unless --keep. Binary: $CARGO_TARGET_DIR
# (default <repo>/target)/release/tcpdoctor.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=/tmp/tcpdoctor-bench
SIZE_ARG=1GiB
KEEP=0
RUNS=3
SEED_FILE=
REQUESTS=50000
CHURN_REQUESTS=2000
RUN_TSHARK=1
GAP_MS=10

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --size) SIZE_ARG=${2:?--size needs a value}; shift 2 ;;
    --size=*) SIZE_ARG=${1#*=}; shift ;;
    --quick) SIZE_ARG=100MiB; shift ;;
    --keep) KEEP=1; shift ;;
    --runs) RUNS=${2:?--runs needs a value}; shift 2 ;;
    --seed) SEED_FILE=${2:?--seed needs a file}; shift 2 ;;
    --requests) REQUESTS=${2:?--requests needs a value}; shift 2 ;;
    --no-tshark) RUN_TSHARK=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench-analyze: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

parse_size() { # 1GiB, 1.5G, 100MB, 500000000 -> bytes
  awk -v s="$1" 'BEGIN {
    if (!match(s, /^[0-9]+(\.[0-9]+)?/)) exit 1
    n = substr(s, 1, RLENGTH); u = toupper(substr(s, RLENGTH + 1))
    if (u == "" || u == "B") m = 1
    else if (u == "K" || u == "KIB") m = 1024
    else if (u == "M" || u == "MIB") m = 1024 ^ 2
    else if (u == "G" || u == "GIB") m = 1024 ^ 3
    else if (u == "KB") m = 1e3
    else if (u == "MB") m = 1e6
    else if (u == "GB") m = 1e9
    else exit 1
    printf "%.0f\n", n * m }'
}
TARGET=$(parse_size "$SIZE_ARG") || { echo "bench-analyze: bad --size '$SIZE_ARG'" >&2; exit 2; }
[ "$TARGET" -ge 1000000 ] || { echo "bench-analyze: --size must be at least 1MB" >&2; exit 2; }
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "bench-analyze: bad --runs '$RUNS'" >&2; exit 2; }

say() { printf '\n== %s\n' "$*"; }

# ---- tools ------------------------------------------------------------------------------------
apt_updated=0
need() { # need COMMAND DEBIAN_PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "installing $2 (for $1)"
  if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}
[ -x /usr/bin/time ] || need /usr/bin/time time
need cc gcc
need python3 python3
[ "$RUN_TSHARK" = 0 ] || need tshark tshark
need editcap wireshark-common
if [ -z "$SEED_FILE" ]; then
  [ "$(id -u)" = 0 ] || { echo "bench-analyze: recording the seed needs root (tcpdump); or pass --seed FILE" >&2; exit 2; }
  need tcpdump tcpdump
  need redis-server redis-server
  need redis-benchmark redis-tools
  need redis-cli redis-tools
fi
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi

REDIS_PID= TCPDUMP_PID=
cleanup() {
  local rc=$?
  if [ -n "$TCPDUMP_PID" ]; then kill -INT "$TCPDUMP_PID" 2>/dev/null || true; wait "$TCPDUMP_PID" 2>/dev/null || true; fi
  if [ -n "$REDIS_PID" ]; then kill "$REDIS_PID" 2>/dev/null || true; wait "$REDIS_PID" 2>/dev/null || true; fi
  if [ "$KEEP" = 1 ]; then
    echo "kept $WORK"
  else
    rm -rf "$WORK"
  fi
  [ "$rc" = 0 ] || echo "bench-analyze: failed (exit $rc)" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$WORK"
mkdir -p "$WORK"

# ---- 1. build -----------------------------------------------------------------------------------
say "build"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
(cd "$REPO" && cargo build --release -p tcpdoctor)
BIN=$CARGO_TARGET_DIR/release/tcpdoctor
[ -x "$BIN" ] || { echo "bench-analyze: no binary at $BIN" >&2; exit 1; }
REV=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "tcpdoctor: $BIN ($("$BIN" --version), commit $REV)"

# ---- 2. the seed: a real capture ----------------------------------------------------------------
SEED=$WORK/seed.pcap
if [ -n "$SEED_FILE" ]; then
  say "seed: $SEED_FILE"
  [ -r "$SEED_FILE" ] || { echo "bench-analyze: cannot read $SEED_FILE" >&2; exit 2; }
  editcap -F pcap "$SEED_FILE" "$SEED" # pcapng -> pcap; a pcap is copied as it is
  SEED_HOW="given: $SEED_FILE"
else
  PORT=$(python3 - <<'EOF'
import random, socket
for p in random.sample(range(20000, 30000), 200):  # below the ephemeral range 32768-60999
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); print(p); break
    except OSError:
        pass
    finally:
        s.close()
EOF
)
  [ -n "$PORT" ] || { echo "bench-analyze: no free port" >&2; exit 1; }
  say "seed: recording redis-benchmark against redis-server on 127.0.0.1:$PORT"
  redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    --logfile "$WORK/redis.log" &
  REDIS_PID=$!
  for _ in $(seq 50); do
    [ "$(redis-cli -p "$PORT" ping 2>/dev/null)" = PONG ] && break
    sleep 0.1
  done
  [ "$(redis-cli -p "$PORT" ping 2>/dev/null)" = PONG ] || { echo "bench-analyze: redis-server did not start" >&2; exit 1; }
  tcpdump -i lo -s 0 -B 65536 -Z root -w "$SEED" "tcp port $PORT" 2>"$WORK/tcpdump.log" &
  TCPDUMP_PID=$!
  for _ in $(seq 100); do
    grep -q 'listening on' "$WORK/tcpdump.log" && break
    sleep 0.05
  done
  grep -q 'listening on' "$WORK/tcpdump.log" || { cat "$WORK/tcpdump.log" >&2; echo "bench-analyze: tcpdump did not start" >&2; exit 1; }
  W1="redis-benchmark -q -n $REQUESTS -c 50 -t ping,set,get -d 64"
  W2="redis-benchmark -q -n $CHURN_REQUESTS -c 10 -k 0 -t ping"
  for w in "$W1" "$W2"; do
    echo "\$ $w"
    $w -p "$PORT" 2>&1 | tr '\r' '\n' | grep 'requests per second' | sed 's/^ */  /'
  done
  sleep 0.3
  kill -INT "$TCPDUMP_PID"; wait "$TCPDUMP_PID" || true; TCPDUMP_PID=
  kill "$REDIS_PID"; wait "$REDIS_PID" || true; REDIS_PID=
  DROPPED=$(awk '/dropped by kernel/ {print $1}' "$WORK/tcpdump.log")
  echo "tcpdump: $(grep 'captured' "$WORK/tcpdump.log"), ${DROPPED:-?} dropped by kernel"
  [ "${DROPPED:-0}" = 0 ] || echo "WARNING: tcpdump dropped packets; the seed has holes (still a valid capture)"
  SEED_HOW="tcpdump -i lo -s 0 of '$W1' then '$W2' against redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')"
fi

# ---- 3. replicate it to the size ----------------------------------------------------------------
say "generate $(awk -v b="$TARGET" 'BEGIN {printf "%.3f GiB (%.1f MB)", b / 1024^3, b / 1e6}')"
cc -O2 -o "$WORK/pcap-replicate" "$REPO/scripts/pcap-replicate.c"
F=$WORK/bench.pcap
t0=$EPOCHREALTIME
"$WORK/pcap-replicate" "$SEED" "$F" "$TARGET" "$GAP_MS" >"$WORK/gen.txt"
t1=$EPOCHREALTIME
declare -A G
while IFS='=' read -r k v; do G[$k]=$v; done <"$WORK/gen.txt"
FILE_BYTES=$(stat -c %s "$F")
[ "$FILE_BYTES" = "${G[bytes]}" ] || { echo "bench-analyze: generator wrote ${G[bytes]} bytes but the file has $FILE_BYTES" >&2; exit 1; }
awk -v sp="${G[seed_packets]}" -v sf="${G[seed_flows]}" -v ss="${G[seed_span_s]}" \
    -v sb="$(stat -c %s "$SEED")" -v c="${G[copies]}" -v p="${G[packets]}" -v f="${G[flows]}" \
    -v tp="${G[tcp_packets]}" -v b="$FILE_BYTES" -v cb="${G[caplen_bytes]}" -v how="$SEED_HOW" \
    -v gs="$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" 'BEGIN {
  printf "seed:   %s\n", how
  printf "        %d packets, %d TCP connections, %.2f s of traffic, %.1f MB\n", sp, sf, ss, sb / 1e6
  printf "result: %s, %d copies of the seed (the last one cut at the size), written in %.1f s\n", "'"$F"'", c, gs
  printf "        %d packets (%d TCP), %d TCP connections, %d bytes (%.3f GiB, %.1f MB)\n", p, tp, f, b, b / 1024^3, b / 1e6
  printf "        mean packet: %.1f bytes captured (%.1f bytes of file with its pcap record header)\n", cb / p, (b - 24) / p
}'

# ---- 4. measure ---------------------------------------------------------------------------------
# timed CMD... : runs CMD under /usr/bin/time; sets T_WALL T_RSS_KIB T_CPU; stdout/stderr as given
timed() {
  local tf=$WORK/time.txt rc=0
  /usr/bin/time -f '%e %M %U %S' -o "$tf" "$@" || rc=$?
  read -r T_WALL T_RSS_KIB u s < <(tail -n 1 "$tf")
  T_CPU=$(awk -v u="$u" -v s="$s" 'BEGIN {printf "%.2f", u + s}')
  return "$rc"
}

say "measure (load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n1))"
cat "$F" >/dev/null
TD_WALLS=() TD_RSS_MAX=0 TD_CPUS=()
# One thread, and with more than one core every core (--threads N: the report must be the
# same byte for byte), one run of each in turn (one thread first in odd runs, last in even
# ones), so that a slow spell of this machine (shared VMs have them: one thread's time has
# swung from 2.7 to 4.6 s between runs minutes apart) falls on both, not on one's runs.
CORES=$(nproc)
TDN_WALL= TDN_WALLS=() PAIRS=()
one_thread() {
  # The first run keeps its report (a few KB; writing it costs nothing) for the cross-check.
  local out=/dev/null; [ "$1" = 1 ] && out=$WORK/report.json
  rc=0; timed "$BIN" analyze --threads 1 --format json "$F" >"$out" || rc=$?
  [ "$rc" = 0 ] || { echo "bench-analyze: tcpdoctor exited $rc" >&2; exit 1; }
  echo "tcpdoctor --threads 1 run $1: $T_WALL s wall, $T_CPU s CPU, peak RSS $T_RSS_KIB KiB"
  TD_WALLS+=("$T_WALL"); TD_CPUS+=("$T_CPU"); ONE=$T_WALL
  if [ "$T_RSS_KIB" -gt "$TD_RSS_MAX" ]; then TD_RSS_MAX=$T_RSS_KIB; fi
}
all_cores() {
  rc=0; timed "$BIN" analyze --threads "$CORES" --format json "$F" >"$WORK/report-n.json" || rc=$?
  [ "$rc" = 0 ] || { echo "bench-analyze: tcpdoctor --threads $CORES exited $rc" >&2; exit 1; }
  echo "tcpdoctor --threads $CORES run $1: $T_WALL s wall, $T_CPU s CPU, peak RSS $T_RSS_KIB KiB"
  TDN_WALLS+=("$T_WALL"); ALL=$T_WALL
}
# What this machine's cores give: CORES one-thread runs at once, each as long as one alone
# when the cores are whole (a VM's two vCPUs on one physical core's two hyperthreads are not:
# then no program gets 2x). Taken after each pair, so that it sees the same spells.
side_by_side() {
  local pids=() k slowest=0 w
  for k in $(seq "$CORES"); do
    /usr/bin/time -f '%e' -o "$WORK/side.$k" "$BIN" analyze --threads 1 --format json "$F" \
      >/dev/null 2>&1 &
    pids+=($!)
  done
  for k in "${pids[@]}"; do wait "$k" || { echo "bench-analyze: a side-by-side run failed" >&2; exit 1; }; done
  for k in $(seq "$CORES"); do
    w=$(tail -n 1 "$WORK/side.$k")
    slowest=$(awk -v a="$slowest" -v b="$w" 'BEGIN {print (b > a) ? b : a}')
  done
  echo "$CORES one-thread runs at once, run $1: the slowest $slowest s"
  SIDE+=("$(awk -v a="$ONE" -v b="$slowest" -v n="$CORES" 'BEGIN {printf "%.2f", (b > 0) ? n * a / b : 0}')")
}
SIDE=()
for i in $(seq "$RUNS"); do
  if [ "$CORES" -le 1 ]; then
    one_thread "$i"
    continue
  fi
  if [ $((i % 2)) = 1 ]; then one_thread "$i"; all_cores "$i"; else all_cores "$i"; one_thread "$i"; fi
  PAIRS+=("$(awk -v a="$ONE" -v b="$ALL" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}')")
  side_by_side "$i"
done
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
TD_WALL=$(printf '%s\n' "${TD_WALLS[@]}" | median)
TD_CPU=$(printf '%s\n' "${TD_CPUS[@]}" | median)
if [ "$CORES" -gt 1 ]; then
  TDN_WALL=$(printf '%s\n' "${TDN_WALLS[@]}" | median)
  echo "--threads 1 over --threads $CORES, run by run: ${PAIRS[*]} (median $(printf '%s\n' "${PAIRS[@]}" | median))"
  echo "what the cores gave $CORES one-thread runs at once (the most any division can), run by run: ${SIDE[*]} (median $(printf '%s\n' "${SIDE[@]}" | median))"
  if cmp -s "$WORK/report.json" "$WORK/report-n.json"; then
    echo "report at --threads $CORES: identical to --threads 1"
  else
    echo "report at --threads $CORES: DIFFERS from --threads 1"
  fi
fi

TS_WALL= TS_RSS_KIB= TS_CPU= TS_CONVS=
if [ "$RUN_TSHARK" = 1 ]; then
  cat "$F" >/dev/null
  # The conversation table goes to a file rather than /dev/null (a few MB, written once at the
  # end) to count its conversations for the cross-check.
  rc=0; timed tshark -r "$F" -q -z conv,tcp >"$WORK/conv.txt" 2>"$WORK/tshark.err" || rc=$?
  [ "$rc" = 0 ] || { cat "$WORK/tshark.err" >&2; echo "bench-analyze: tshark exited $rc" >&2; exit 1; }
  TS_WALL=$T_WALL TS_RSS_KIB=$T_RSS_KIB TS_CPU=$T_CPU
  TS_CONVS=$(grep -c '<->' "$WORK/conv.txt" || true)
  echo "tshark: $T_WALL s wall, $T_CPU s CPU, peak RSS $T_RSS_KIB KiB"
  if grep -v 'Running as user "root"' "$WORK/tshark.err" | grep -q .; then
    echo "WARNING: tshark said on stderr:"; grep -v 'Running as user "root"' "$WORK/tshark.err" | head -n 20
  else
    echo "tshark read the file without a warning"
  fi
fi

# ---- cross-check ----------------------------------------------------------------------------------
read -r R_FRAMES R_FLOWS R_FINDINGS < <(python3 - "$WORK/report.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["captures"][0]
kinds = sorted({f["kind"] for f in r.get("findings", [])})
print(c["frames"], c["flows"], ",".join(kinds) or "none")
EOF
)
say "cross-check"
check() { if [ "$2" = "$3" ]; then echo "$1: $2 (same)"; else echo "$1: MISMATCH $4"; fi; }
check "frames" "${G[packets]}" "$R_FRAMES" "generator ${G[packets]}, tcpdoctor $R_FRAMES"
check "flows (generator vs tcpdoctor)" "${G[flows]}" "$R_FLOWS" "generator ${G[flows]}, tcpdoctor $R_FLOWS"
[ -z "$TS_CONVS" ] || check "flows (generator vs tshark conv,tcp)" "${G[flows]}" "$TS_CONVS" "generator ${G[flows]}, tshark $TS_CONVS"
echo "tcpdoctor findings: $R_FINDINGS"
python3 - "$WORK/report.json" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))["captures"][0].get("audit")
print("evidence audit: " + (json.dumps(a) if a else "no findings cited frames, no second pass"))
EOF

# ---- gzip ---------------------------------------------------------------------------------------
say "gzip: the same capture compressed (gzip -1), read transparently"
if command -v gzip >/dev/null 2>&1; then
  gzip -1 -c "$F" >"$F.gz"
  GZ_BYTES=$(stat -c %s "$F.gz")
  cat "$F.gz" >/dev/null
  timed sh -c "zcat '$F.gz' >/dev/null"; ZCAT_WALL=$T_WALL
  printf "%s MB compressed to %s MB; zcat alone %s s (%s MB/s of capture)\n" \
    "$(awk -v b="$FILE_BYTES" 'BEGIN {printf "%.1f", b / 1e6}')" "$(awk -v g="$GZ_BYTES" 'BEGIN {printf "%.1f", g / 1e6}')" \
    "$ZCAT_WALL" "$(awk -v b="$FILE_BYTES" -v z="$ZCAT_WALL" 'BEGIN {if (z <= 0) z = 0.01; printf "%.1f", b / 1e6 / z}')"
  for t in 1 $([ "$CORES" -gt 1 ] && echo "$CORES"); do
    rc=0; timed "$BIN" analyze --threads "$t" --format json "$F.gz" >/dev/null || rc=$?
    [ "$rc" = 0 ] || { echo "bench-analyze: tcpdoctor exited $rc on the gzip copy" >&2; exit 1; }
    awk -v t="$t" -v b="$FILE_BYTES" -v w="$T_WALL" -v z="$ZCAT_WALL" -v r="$T_RSS_KIB" 'BEGIN {
      if (w <= 0) w = 0.01; if (z <= 0) z = 0.01
      printf "tcpdoctor --threads %d on the .gz: %.2f s, %.1f MB/s of capture (%.0f%% of the zcat ceiling), peak RSS %.1f MB\n", t, w, b / 1e6 / w, 100 * z / w, r * 1024 / 1e6
    }'
  done
  rm -f "$F.gz"
else
  echo "gzip not found: skipped"
fi

# ---- 5. report ----------------------------------------------------------------------------------
say "results: $(awk -v b="$FILE_BYTES" 'BEGIN {printf "%.1f MB", b / 1e6}'), ${G[packets]} packets, ${G[flows]} flows (MB = 10^6 bytes)"
awk -v b="$FILE_BYTES" -v p="${G[packets]}" -v runs="$RUNS" \
    -v tw="$TD_WALL" -v tr="$TD_RSS_MAX" -v tc="$TD_CPU" -v nw="$TDN_WALL" -v cores="$CORES" \
    -v sw="$TS_WALL" -v sr="$TS_RSS_KIB" -v sc="$TS_CPU" 'BEGIN {
  fmt = "%-22s %9s %14s %10s %13s %8s\n"
  printf fmt, "tool", "wall s", "packets/s", "MB/s", "peak RSS MB", "CPU s"
  row("tcpdoctor (median of " runs ")", tw, tr, tc)
  if (nw != "") printf "%-22s %9s   (--threads %d, median of %d)\n", "tcpdoctor, all cores", sprintf("%.2f", nw), cores, runs
  if (sw != "") row("tshark -z conv,tcp", sw, sr, sc)
  mbs = b / 1e6 / tw; rss = tr * 1024 / 1e6
  if (sw != "") {
    sp = sw / tw
    printf "\nspeedup: tcpdoctor is %.1fx faster than tshark on one thread (%.2f s vs %.2f s)\n", sp, tw, sw
    if (nw != "" && nw > 0) printf "         and %.1fx with all %d cores, its default (%.2f s vs %.2f s)\n", sw / nw, cores, nw, sw
  }
  print ""
  print "goals:"
  gfmt = "  %-4s  %-50s %s\n"
  printf gfmt, (mbs >= 500 ? "PASS" : "MISS"), "tcpdoctor >= 500 MB/s, single-threaded", sprintf("%.1f MB/s", mbs)
  if (sw != "") printf gfmt, (sp >= 50 ? "PASS" : "MISS"), "tcpdoctor >= 50x faster than tshark, one thread", sprintf("%.1fx", sp)
  else          printf gfmt, "n/a", "tcpdoctor >= 50x faster than tshark, one thread", "(--no-tshark)"
  if (sw != "" && nw != "" && nw > 0) printf gfmt, (sw / nw >= 50 ? "PASS" : "MISS"), "tcpdoctor >= 50x faster than tshark, all cores", sprintf("%.1fx", sw / nw)
  printf gfmt, (rss < 200 ? "PASS" : "MISS"), "tcpdoctor peak RSS < 200 MB", sprintf("%.1f MB", rss)
  if (nw != "") {
    if (nw <= 0) nw = 0.01
    printf gfmt, (tw / nw >= 1.7 ? "PASS" : "MISS"), "--threads " cores " >= 1.7x --threads 1", sprintf("%.2fx (%.2f s vs %.2f s)", tw / nw, nw, tw)
  }
}
function row(name, w, r, c) {
  if (w <= 0) w = 0.01   # %e has 10 ms resolution
  printf fmt, name, sprintf("%.2f", w), sprintf("%.0f", p / w), sprintf("%.1f", b / 1e6 / w), sprintf("%.1f", r * 1024 / 1e6), c
}'
