# Shared by the scripts/bench-*.sh benchmarks: a scratch directory and the processes started,
# both cleaned up on exit, and small helpers for loopback servers. Source it after `set -euo
# pipefail`.

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# A free TCP port on 127.0.0.1 (bound and released; a race is possible but harmless here).
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits (bounded, 10 s) until something accepts on 127.0.0.1:$1.
wait_port() {
    for _ in $(seq 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "nothing listening on port $1" >&2
    return 1
}
