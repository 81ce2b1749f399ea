"""``python -m tcpdoctor ARGS``: runs the installed binary with the same arguments; its exit
code is this process's."""

from __future__ import annotations

import os
import sys

from tcpdoctor._binary import find_tcpdoctor_bin


def main() -> "None":
    binary = find_tcpdoctor_bin()
    args = [binary, *sys.argv[1:]]
    if sys.platform == "win32":  # pragma: no cover - Linux only, kept for completeness
        import subprocess

        sys.exit(subprocess.call(args))
    os.execv(binary, args)


if __name__ == "__main__":
    main()
