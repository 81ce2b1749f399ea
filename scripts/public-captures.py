#!/usr/bin/env python3
"""public-captures.py: run `tcpdoctor analyze` over the public captures in
testdata/public/MANIFEST.tsv and print what it found: counts per finding kind and
severity, findings withdrawn by the evidence audit (per reason), and files it could not read
(per error class).

The captures are not in this repository (several collections are GPL or LGPL); fetch them
first, by hand — CI reaches no repository:

    scripts/public-captures.py --print-fetch DIR | sh      # git clones at the listed commits
    cargo build --release
    scripts/public-captures.py DIR                          # DIR/<owner>/<name>/<path>
    scripts/public-captures.py DIR --json out.json          # every file's findings, for diffs
    scripts/public-captures.py DIR --kind nagle_delayed_ack # list each finding of one kind

Each file's SHA-256 is checked against the manifest; a file that differs or is missing is
counted and skipped, so the figures always describe the same bytes.
"""
import argparse
import collections
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, "..", "testdata", "public", "MANIFEST.tsv")


def manifest():
    with open(MANIFEST) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            repo, commit, path, sha, size = line.rstrip("\n").split("\t")
            yield repo, commit, path, sha, int(size)


def print_fetch(root):
    seen = {}
    for repo, commit, *_ in manifest():
        seen[repo] = commit
    for repo, commit in sorted(seen.items()):
        dest = os.path.join(root, repo)
        print(f"git clone --quiet https://github.com/{repo} {dest} && "
              f"git -C {dest} checkout --quiet {commit}")


def error_class(stderr):
    """The error message with file names, numbers and byte values taken out."""
    line = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
    line = re.sub(r"^tcpdoctor: error: [^:]*: ", "", line)
    line = re.sub(r"reading [^:]*: ", "", line)
    line = re.sub(r"\[[0-9a-f, ]*\]", "[…]", line)
    if line.startswith("no TCP packets"):
        return "no TCP packets in this capture"
    return re.sub(r"\d+", "N", line)[:120]


def run(binary, path):
    try:
        p = subprocess.run([binary, "analyze", "--format", "json", path],
                           capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        return {"rc": "timeout"}
    out = {"rc": p.returncode}
    if p.returncode in (0, 1):
        try:
            report = json.loads(p.stdout)
        except json.JSONDecodeError as e:
            out["rc"] = f"bad json: {e}"
            return out
        out["findings"] = report.get("findings", [])
        out["withdrawn"] = report.get("withdrawn", [])
        warnings = [l for l in p.stderr.decode(errors="replace").splitlines() if "warning" in l]
        if warnings:
            out["warnings"] = warnings
    else:
        out["error"] = error_class(p.stderr.decode(errors="replace"))
    if p.returncode not in (0, 1, 2):
        out["crash"] = p.stderr.decode(errors="replace")[-500:]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", help="directory holding <owner>/<name>/ checkouts")
    ap.add_argument("--tcpdoctor", default=os.path.join(HERE, "..", "target", "release",
                                                        "tcpdoctor"))
    ap.add_argument("--print-fetch", action="store_true",
                    help="print the git commands that fetch the collections into ROOT")
    ap.add_argument("--json", help="write every file's result here")
    ap.add_argument("--kind", help="list each finding of this kind (file, server, frames)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    if a.print_fetch:
        print_fetch(a.root)
        return 0
    if not os.access(a.tcpdoctor, os.X_OK):
        sys.exit(f"public-captures.py: {a.tcpdoctor} not found (cargo build --release)")

    files, missing, changed = [], 0, 0
    for repo, _commit, path, sha, _size in manifest():
        full = os.path.join(a.root, repo, path)
        if not os.path.exists(full):
            missing += 1
            continue
        with open(full, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != sha:
                changed += 1
                continue
        files.append((f"{repo}/{path}", full))
    if not files:
        sys.exit(f"public-captures.py: none of the manifest's files under {a.root} "
                 "(try --print-fetch)")

    results = {}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        futures = {ex.submit(run, a.tcpdoctor, full): name for name, full in files}
        for fut in concurrent.futures.as_completed(futures):
            results[futures[fut]] = fut.result()

    kinds = collections.Counter()
    severities = collections.Counter()
    withdrawn = collections.Counter()
    errors = collections.Counter()
    rcs = collections.Counter()
    crashes = []
    for name, r in sorted(results.items()):
        rcs[str(r["rc"])] += 1
        for f in r.get("findings", []):
            kinds[f["kind"]] += 1
            severities[(f["kind"], f["severity"])] += 1
        for w in r.get("withdrawn", []):
            for reason in w.get("reasons", ["?"]):
                withdrawn[(w.get("kind", "?"), re.sub(r"\d+", "N", reason)[:100])] += 1
        if "error" in r:
            errors[r["error"]] += 1
        if "crash" in r or r["rc"] == "timeout":
            crashes.append(name)

    print(f"{len(files)} captures analysed ({missing} missing, {changed} not matching the "
          f"manifest); exit status: {dict(rcs)}")
    print(f"\nfindings: {sum(kinds.values())}")
    for kind, n in kinds.most_common():
        sev = ", ".join(f"{s} {severities[(kind, s)]}" for s in ("critical", "warning", "info")
                        if severities[(kind, s)])
        print(f"  {kind:24} {n:5}   ({sev})")
    print(f"\nwithdrawn by the evidence audit: {sum(withdrawn.values())}")
    for (kind, reason), n in withdrawn.most_common():
        print(f"  {n:5}  {kind}: {reason}")
    print(f"\nnot analysed (exit 2), by message: {sum(errors.values())}")
    for msg, n in errors.most_common(15):
        print(f"  {n:5}  {msg}")
    if crashes:
        print(f"\nCRASHED OR HUNG ({len(crashes)}):")
        for name in crashes:
            print(f"  {name}")
    if a.kind:
        print(f"\n{a.kind}:")
        for name, r in sorted(results.items()):
            for f in r.get("findings", []):
                if f["kind"] == a.kind:
                    print(f"  {name}  {f['severity']}  {f['server']} {f['direction']}  "
                          f"frames {f['evidence']['frames']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
