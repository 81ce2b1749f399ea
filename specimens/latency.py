"""Shared helpers for the Python specimens: the readiness line and the latency summary.

Every specimen server prints exactly one line `PORT <n>` on stdout once it is listening
(it binds port 0), so a driver can read that line instead of sleeping. Everything else a
server says goes to stderr.

Every specimen client prints one line per exchange and then one summary line in the same
format as `wwr_client.c`, so README figures and `.expect` comments can quote them directly:

    summary count=30 median_ms=41.2 p90_ms=42.0 max_ms=43.9 stalled=27 stalled_share=0.90 (stalled = >= 30 ms)
"""

import sys

STALL_MS = 30.0


def note(msg):
    """One line to stderr in a single write, so it cannot interleave with a client's output
    in a shared log."""
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def announce_port(sock):
    """Print the readiness line for a listening socket."""
    print(f"PORT {sock.getsockname()[1]}", flush=True)


def percentile(sorted_values, q):
    """Nearest-rank percentile of an already sorted list (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, -(-len(sorted_values) * q // 100))  # ceil without floats
    return sorted_values[int(rank) - 1]


def summary_line(latencies_ms):
    values = sorted(latencies_ms)
    stalled = sum(1 for v in values if v >= STALL_MS)
    share = stalled / len(values) if values else 0.0
    return (
        f"summary count={len(values)} median_ms={percentile(values, 50):.2f} "
        f"p90_ms={percentile(values, 90):.2f} max_ms={(values[-1] if values else float('nan')):.2f} "
        f"stalled={stalled} stalled_share={share:.2f} (stalled = >= {STALL_MS:.0f} ms)"
    )


def print_exchange(i, ms, quiet=False):
    if not quiet:
        print(f"exchange {i} {ms:.3f} ms")


def print_summary(latencies_ms, out=sys.stdout):
    print(summary_line(latencies_ms), file=out, flush=True)
