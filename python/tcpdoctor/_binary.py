"""Where the `tcpdoctor` binary is: the one the wheel installed next to this interpreter.

Order: the ``TCPDOCTOR_BIN`` environment variable (a path; used as given), the scripts
directory of the running interpreter (a venv's ``bin/``, or the system's), the user scheme's
(``pip install --user``: ``~/.local/bin``), then ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from typing import List, Optional

__all__ = ["find_tcpdoctor_bin", "BinaryNotFound"]

EXE = "tcpdoctor" + (sysconfig.get_config_var("EXE") or "")


class BinaryNotFound(FileNotFoundError):
    """No `tcpdoctor` binary in any place the wheel could have put it."""


def _user_scheme() -> Optional[str]:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    return "posix_user" if os.name == "posix" else "nt_user"


def _candidates() -> List[str]:
    dirs: List[str] = []
    scripts = sysconfig.get_path("scripts")
    if scripts:
        dirs.append(scripts)
    scheme = _user_scheme()
    if scheme:
        try:
            user = sysconfig.get_path("scripts", scheme=scheme)
        except KeyError:
            user = None
        if user:
            dirs.append(user)
    return [os.path.join(d, EXE) for d in dirs]


def find_tcpdoctor_bin() -> str:
    """The path of the `tcpdoctor` binary; raises :class:`BinaryNotFound` naming where it looked."""
    override = os.environ.get("TCPDOCTOR_BIN")
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise BinaryNotFound(f"TCPDOCTOR_BIN={override}: not an executable file")
    tried = _candidates()
    for path in tried:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    on_path = shutil.which(EXE)
    if on_path:
        return on_path
    raise BinaryNotFound(
        "the tcpdoctor binary is not installed: looked in "
        + ", ".join(tried + ["PATH"])
        + " (install the wheel with pip, or set TCPDOCTOR_BIN)"
    )
