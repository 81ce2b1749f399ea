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
import sys


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


def quantile(v, p):
    return v[min(len(v) - 1, int(p * len(v)))]


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    near, far = load(sys.argv[1]), load(sys.argv[2])
    delay_ns = float(sys.argv[3]) * 1000
    rounds = len(near["tx"])
    skip = int(sys.argv[4]) if len(sys.argv) == 5 else rounds // 10
    errs = {"c2s": [], "s2c": []}
    for k in range(skip, rounds):
        if k in near["tx"] and k in far["rx"]:
            errs["c2s"].append(far["rx"][k] - near["tx"][k] - delay_ns)
        if k in far["tx"] and k in near["rx"]:
            errs["s2c"].append(near["rx"][k] - far["tx"][k] - delay_ns)
    errs["all"] = errs["c2s"] + errs["s2c"]
    if not errs["all"]:
        sys.exit("no byte has stamps at both ends")
    for name, e in errs.items():
        s = sorted(e)
        a = sorted(abs(x) for x in e)
        unpaired = rounds - skip - len(e) if name != "all" else 2 * (rounds - skip) - len(e)
        print(
            f"{name} n={len(e)} unpaired={unpaired} signed_p50={quantile(s, .5)/1e3:+.1f} "
            f"abs_p50={quantile(a, .5)/1e3:.1f} abs_p99={quantile(a, .99)/1e3:.1f} "
            f"abs_max={a[-1]/1e3:.1f} (us)"
        )


main()
