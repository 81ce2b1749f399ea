#!/usr/bin/env python3
"""Pairs the two ends' kernel timestamps of a one-byte ping-pong (netbench pingpong-stamped
at the near end, echo-stamped at the far end) and prints how far each byte's one-way time
strayed from the configured delay, per direction and together, in µs.

usage: wan-delay-stamps.py NEAR FAR DELAY_US [SKIP]
  NEAR, FAR  the files the two netbench ends wrote (`tx|rx K NS` per line)
  DELAY_US   the configured one-way delay
  SKIP       leave out the first SKIP round trips (default: a tenth), as the warm-up
Output lines: `c2s|s2c|all n=N signed_p50=… abs_p50=… abs_p99=… abs_max=… (us)`, the same
shape as wan-delay-pairs.py prints for device captures. Bad input (a file it cannot read, a
malformed line, a number that is not one) exits 2 with the file and line."""
import importlib.util
import os
import sys

# The pairing of device captures has the quantile and the report lines this prints too.
_spec = importlib.util.spec_from_file_location(
    "wan_delay_pairs", os.path.join(os.path.dirname(os.path.abspath(__file__)), "wan-delay-pairs.py"))
pairs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pairs)


def load(path):
    out = {"tx": {}, "rx": {}}
    try:
        f = open(path)
    except OSError as e:
        pairs.fail(f"wan-delay-stamps.py: {path}: {e.strerror}")
    with f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 3 or parts[0] not in out or not all(
                    p.isdigit() for p in parts[1:]):
                pairs.fail(f"wan-delay-stamps.py: {path}:{n}: expected `tx|rx K NS`, "
                           f"got {line.strip()!r}")
            out[parts[0]][int(parts[1])] = int(parts[2])
    return out


def main():
    if len(sys.argv) not in (4, 5):
        pairs.fail(__doc__)
    near, far = load(sys.argv[1]), load(sys.argv[2])
    try:
        delay_ns = float(sys.argv[3]) * 1000
        skip = int(sys.argv[4]) if len(sys.argv) == 5 else None
    except ValueError as e:
        pairs.fail(f"wan-delay-stamps.py: DELAY_US and SKIP are numbers: {e}")
    rounds = len(near["tx"])
    if skip is None:
        skip = rounds // 10
    errs = {"c2s": [], "s2c": []}
    unpaired = {"c2s": 0, "s2c": 0}
    for k in range(skip, rounds):
        for way, sent, got in (("c2s", near["tx"], far["rx"]), ("s2c", far["tx"], near["rx"])):
            if k in sent and k in got:
                errs[way].append((got[k] - sent[k] - delay_ns) / 1000.0)
            else:
                unpaired[way] += 1
    if not errs["c2s"] and not errs["s2c"]:
        pairs.fail("wan-delay-stamps.py: no byte has stamps at both ends")
    pairs.report(errs, unpaired)


if __name__ == "__main__":
    main()
