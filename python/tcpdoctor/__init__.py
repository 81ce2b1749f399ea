"""tcpdoctor from Python: run the bundled binary and read its JSON reports as typed objects.

    import tcpdoctor
    report = tcpdoctor.analyze("capture.pcap")
    for f in report.findings:
        print(f.kind, f.verdict, f.fix)

``analyze``, ``run`` and ``inspect`` return report objects built from the tool's schema'd
JSON (``raw`` keeps the dict). Bad input — the tool's exit 2, or output that is not a report —
raises :class:`TcpdoctorError` carrying the tool's own message; a failed gate (exit 1) is a
report whose ``failed`` is True and whose ``reasons`` say why. The pytest plugin
(``tcpdoctor.pytest_plugin``, loaded through the ``pytest11`` entry point) adds the
``tcpdoctor_run`` and ``wan_path`` fixtures.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from tcpdoctor._binary import BinaryNotFound, find_tcpdoctor_bin
from tcpdoctor._report import (
    AnalyzeReport,
    Check,
    Evidence,
    Figures,
    Finding,
    InspectReport,
    RunReport,
    Scenario,
)

try:
    from importlib.metadata import PackageNotFoundError, version as _dist_version
except ImportError:  # pragma: no cover - Python < 3.8
    raise

try:
    __version__: str = _dist_version("tcpdoctor")
except PackageNotFoundError:  # pragma: no cover - imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = [
    "__version__",
    "analyze",
    "run",
    "inspect",
    "TcpdoctorError",
    "BinaryNotFound",
    "find_tcpdoctor_bin",
    "AnalyzeReport",
    "RunReport",
    "InspectReport",
    "Scenario",
    "Figures",
    "Finding",
    "Evidence",
    "Check",
]

PathLike = Union[str, "os.PathLike[str]"]


class TcpdoctorError(Exception):
    """tcpdoctor refused the input or did not produce a report: ``message`` is what it said
    on stderr (exit 2: the flag, file or line at fault), ``returncode`` its exit status
    (negative: the signal that ended it), ``args_used`` the command line."""

    def __init__(self, message: str, returncode: Optional[int], args_used: Sequence[str]):
        self.message = message
        self.returncode = returncode
        self.args_used = list(args_used)
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.message}\n(tcpdoctor exit {self.returncode}: {' '.join(self.args_used)})"


def _execute(
    args: List[str],
    timeout_s: Optional[float],
    cwd: Optional[PathLike],
    env: Optional[Mapping[str, str]],
) -> "tuple[int, str, str]":
    """Runs the binary; on ``timeout_s`` sends SIGTERM (tcpdoctor then stops its server and
    reports), SIGKILL 10 s later, and raises."""
    cmd = [find_tcpdoctor_bin(), *args]
    full_env = None if env is None else {**os.environ, **env}
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=full_env,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise TcpdoctorError(
            f"tcpdoctor did not finish within {timeout_s} s; stderr: {err.strip()}",
            proc.returncode,
            cmd,
        )
    return proc.returncode, out, err


def _report_json(code: int, out: str, err: str, args: Sequence[str]) -> Dict[str, Any]:
    if code not in (0, 1):
        raise TcpdoctorError(err.strip() or f"tcpdoctor exited {code} and said nothing", code, args)
    try:
        data = json.loads(out)
    except ValueError as e:
        raise TcpdoctorError(
            f"tcpdoctor exited {code} without a JSON report ({e}); stderr: {err.strip()}",
            code,
            args,
        ) from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise TcpdoctorError(
            f"tcpdoctor printed JSON that is not a report; stderr: {err.strip()}", code, args
        )
    return data


def analyze(
    *paths: PathLike,
    fail_on: Iterable[str] = (),
    extra_args: Sequence[str] = (),
    timeout_s: Optional[float] = None,
) -> AnalyzeReport:
    """``tcpdoctor analyze --format json PATH...``: the findings of one or more capture files
    (pcap, pcapng, gzip'd). Raises :class:`TcpdoctorError` naming the file when one cannot be
    read."""
    if not paths:
        raise ValueError("analyze() needs at least one capture file")
    args = ["analyze", "--format", "json"]
    kinds = list(fail_on)
    if kinds:
        args += ["--fail-on", ",".join(kinds)]
    args += list(extra_args) + [os.fspath(p) for p in paths]
    code, out, err = _execute(args, timeout_s, None, None)
    return AnalyzeReport.from_json(_report_json(code, out, err, args), code, err)


def run(
    *,
    target: str,
    server: Optional[str] = None,
    script: Optional[PathLike] = None,
    preset: Optional[str] = None,
    params: Optional[Mapping[str, str]] = None,
    scenarios: Sequence[str] = ("direct",),
    requests: Optional[int] = None,
    checks: Sequence[str] = (),
    fail_on: Sequence[str] = (),
    out: Optional[PathLike] = None,
    connections: Optional[int] = None,
    pipeline: Optional[int] = None,
    repeat: Optional[int] = None,
    ready_timeout: Optional[str] = None,
    trace: Optional[bool] = None,
    sandbox: bool = False,
    extra_args: Sequence[str] = (),
    cwd: Optional[PathLike] = None,
    env: Optional[Mapping[str, str]] = None,
    timeout_s: Optional[float] = None,
) -> RunReport:
    """``tcpdoctor run --format json``: start ``server`` (a shell command line; optional),
    drive ``target`` (``IP:PORT`` or ``unix:PATH``) with ``script`` or ``preset`` (+ ``params``)
    over each of ``scenarios`` (``direct``, ``proxy``, ``proxy-nagle``, ``wan:15ms``, …) and
    return the report. ``checks`` (``'p99<5ms'``) and ``fail_on`` (finding kinds) make the
    gate: when it fails the report says so (``failed``, ``reasons``) — no exception. Bad input
    or a server that never got ready raises :class:`TcpdoctorError` with the tool's message.
    ``trace``: None leaves tcpdoctor's default, False passes ``--no-trace``, True ``--trace``.
    ``timeout_s`` bounds the whole command (SIGTERM, then an error)."""
    if (script is None) == (preset is None):
        raise ValueError("run() needs exactly one of script= or preset=")
    args = ["run", "--format", "json", "--target", target]
    if server is not None:
        args += ["--server", server]
    if script is not None:
        args += ["--script", os.fspath(script)]
    if preset is not None:
        args += ["--preset", preset]
    for key, value in (params or {}).items():
        args += ["--param", f"{key}={value}"]
    if scenarios:
        args += ["--scenarios", ",".join(scenarios)]
    numbers: "tuple[tuple[str, Union[int, str, None]], ...]" = (
        ("--requests", requests),
        ("--connections", connections),
        ("--pipeline", pipeline),
        ("--repeat", repeat),
        ("--ready-timeout", ready_timeout),
    )
    for flag, number in numbers:
        if number is not None:
            args += [flag, str(number)]
    for c in checks:
        args += ["--check", c]
    if fail_on:
        args += ["--fail-on", ",".join(fail_on)]
    if out is not None:
        args += ["--out", os.fspath(out)]
    if trace is False:
        args.append("--no-trace")
    elif trace is True:
        args.append("--trace")
    if sandbox:
        args.append("--sandbox")
    args += list(extra_args)
    code, stdout, err = _execute(args, timeout_s, cwd, env)
    return RunReport.from_json(_report_json(code, stdout, err, args), code, err)


def inspect(
    *,
    pid: Union[int, Sequence[int], None] = None,
    port: Optional[int] = None,
    duration: Optional[str] = None,
    fail_on: Sequence[str] = (),
    extra_args: Sequence[str] = (),
    timeout_s: Optional[float] = None,
) -> InspectReport:
    """``tcpdoctor inspect --format json``: watch live processes (``pid``, one or several) or
    every process holding local TCP ``port`` for ``duration`` (``"3s"``, tcpdoctor's
    default; ``"0"`` one sample) and return the findings."""
    if (pid is None) == (port is None):
        raise ValueError("inspect() needs exactly one of pid= or port=")
    args = ["inspect", "--format", "json"]
    if pid is not None:
        pids = [pid] if isinstance(pid, int) else list(pid)
        args += ["--pid", ",".join(str(p) for p in pids)]
    if port is not None:
        args += ["--port", str(port)]
    if duration is not None:
        args += ["--duration", str(duration)]
    if fail_on:
        args += ["--fail-on", ",".join(fail_on)]
    args += list(extra_args)
    code, out, err = _execute(args, timeout_s, None, None)
    return InspectReport.from_json(_report_json(code, out, err, args), code, err)
