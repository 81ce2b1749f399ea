#!/usr/bin/env python3
"""Pairs the two ends' kernel timestamps of a one-byte ping-pong (netbench pingpong-stamped
at the near end, echo-stamped at the far end) and prints how far each byte's one-way time
strayed from the configured delay, per direction and together, in µs.

usage: wan-delay-stamps.py NEAR FAR DELAY_US [SKIP]
  NEAR, FAR  the files the two netbench ends wrote (`tx|rx K NS` per line)
  DELAY_US   the configured one-way delay
  SKIP       leave out the first SKIP round trips (default: a tenth), as the warm-up
Output lines: `c2s|s2c|all n=N signed_p50=… abs_p50=… abs_p99=… abs_max=… (us)`, the same
shape as wan-delay-pairs.py prints for device captures."""
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
    with open(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 3 or parts[0] not in out:
                sys.exit(f"{path}:{n}: expected `tx|rx K NS`, got {line.strip()!r}")
            out[parts[0]][int(parts[1])] = int(parts[2])
    return out


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    near, far = load(sys.argv[1]), load(sys.argv[2])
    delay_ns = float(sys.argv[3]) * 1000
    rounds = len(near["tx"])
    skip = int(sys.argv[4]) if len(sys.argv) == 5 else rounds // 10
    errs = {"c2s": [], "s2c": []}
    unpaired = {"c2s": 0, "s2c": 0}
    for k in range(skip, rounds):
        for way, sent, got in (("c2s", near["tx"], far["rx"]), ("s2c", far["tx"], near["rx"])):
            if k in sent and k in got:
                errs[way].append((got[k] - sent[k] - delay_ns) / 1000.0)
            else:
                unpaired[way] += 1
    if not errs["c2s"] and not errs["s2c"]:
        sys.exit("no byte has stamps at both ends")
    pairs.report(errs, unpaired)


if __name__ == "__main__":
    main()
