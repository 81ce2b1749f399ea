"""The pytest plugin (entry point ``pytest11``): fixtures only, so nothing runs unless a test
asks for one.

``tcpdoctor_run``
    A callable: ``tcpdoctor_run(SERVER, preset=…|script=…, params=…, scenarios=[…])`` starts
    the server command under ``tcpdoctor run`` and returns the :class:`tcpdoctor.RunReport`.
    ``{port}`` in the server command and the target is a free loopback port picked for the
    test (the target defaults to ``127.0.0.1:{port}``); the command runs with ``sh -c`` in the
    test file's directory; captures and the server's log go under the test's ``tmp_path``;
    20 exchanges per scenario unless ``requests=`` says otherwise.

``wan_path``
    A callable: ``wan_path(delay="15ms", loss=None, rate=None, **options)`` returns the
    ``wan:…`` scenario of a real path (two network namespaces and tcpdoctor's delay line;
    real kernel TCP at both ends; docs/wan.md). The test skips, saying why, where user
    namespaces or /dev/net/tun are unavailable — or fails, when ``TCPDOCTOR_REQUIRE_WAN=1``.

The report's assertion helpers (``report.assert_no_finding("nagle_delayed_ack")``,
``report.assert_round_trips(1)``, ``report.assert_passed()``) fail with the finding's own
text: verdict, evidence, frames, fix.
"""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence, Union

import pytest

import tcpdoctor
from tcpdoctor import RunReport, TcpdoctorError

__all__ = ["tcpdoctor_run", "wan_path", "wan_unavailable_reason", "WAN_UNAVAILABLE_MARKERS"]

#: What tcpdoctor says (exit 2) when this machine cannot build a WAN path for this user — the
#: same markers the Rust tests look for (crates/tcpdoctor/tests/common/mod.rs).
WAN_UNAVAILABLE_MARKERS = (
    "cannot create a user namespace",
    "in the new user namespace",
    "opening /dev/net/tun",
    "no WAN path here",
)


def _required(flag: str) -> bool:
    value = os.environ.get(flag)
    return value is not None and value != "0"


def _skip_or_fail(why: str) -> None:
    if _required("TCPDOCTOR_REQUIRE_WAN"):
        pytest.fail(f"TCPDOCTOR_REQUIRE_WAN is set but there is no WAN path here: {why}")
    pytest.skip(f"no WAN path here: {why}")


def _read_int(path: str) -> Optional[int]:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def wan_unavailable_reason() -> Optional[str]:
    """Why a ``wan:`` scenario cannot run here, as far as the files say (None: it may); the
    run itself is the final word (its exit-2 message, which ``tcpdoctor_run`` turns into a
    skip too)."""
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun does not exist"
    try:
        os.close(os.open("/dev/net/tun", os.O_RDWR))
    except OSError as e:
        return f"opening /dev/net/tun: {e.strerror}"
    if os.geteuid() != 0:
        # As root `run` enters a network namespace only; any other user needs a user namespace.
        if _read_int("/proc/sys/user/max_user_namespaces") == 0:
            return "user namespaces are off (/proc/sys/user/max_user_namespaces is 0)"
        if _read_int("/proc/sys/kernel/unprivileged_userns_clone") == 0:
            return "unprivileged user namespaces are off (kernel.unprivileged_userns_clone=0)"
        if _read_int("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1:
            return (
                "AppArmor restricts unprivileged user namespaces "
                "(kernel.apparmor_restrict_unprivileged_userns=1)"
            )
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _is_wan(scenarios: Sequence[str]) -> bool:
    return any(s.startswith("wan:") for s in scenarios)


RunFn = Callable[..., RunReport]


@pytest.fixture
def tcpdoctor_run(request: pytest.FixtureRequest, tmp_path: Path) -> RunFn:
    """Runs a server under ``tcpdoctor run`` and returns the report (see the module doc)."""
    counter = itertools.count(1)
    # request.path: pytest 7 and later; fspath before.
    test_file = getattr(request, "path", None) or Path(str(request.node.fspath))
    test_dir = Path(test_file).parent

    def run(
        server: str,
        *,
        target: Optional[str] = None,
        preset: Optional[str] = None,
        script: Optional[Union[str, "os.PathLike[str]"]] = None,
        params: Optional[Dict[str, str]] = None,
        scenarios: Sequence[str] = ("direct",),
        requests: int = 20,
        checks: Sequence[str] = (),
        fail_on: Sequence[str] = (),
        timeout_s: Optional[float] = 600,
        **options: Any,
    ) -> RunReport:
        port = _free_port()
        out = tmp_path / f"tcpdoctor-run-{next(counter)}"
        scenarios = list(scenarios)
        try:
            return tcpdoctor.run(
                server=server.replace("{port}", str(port)),
                target=(target or "127.0.0.1:{port}").replace("{port}", str(port)),
                preset=preset,
                script=script,
                params=params,
                scenarios=scenarios,
                requests=requests,
                checks=checks,
                fail_on=fail_on,
                out=out,
                cwd=options.pop("cwd", test_dir),
                timeout_s=timeout_s,
                **options,
            )
        except TcpdoctorError as e:
            if _is_wan(scenarios) and any(m in e.message for m in WAN_UNAVAILABLE_MARKERS):
                _skip_or_fail(e.message)
            raise

    return run


WanFn = Callable[..., str]


@pytest.fixture
def wan_path() -> WanFn:
    """``wan_path(delay="15ms", loss=None, rate=None, **options)`` → ``"wan:15ms,…"``; skips
    the test where this machine cannot build the path (see the module doc)."""
    why = wan_unavailable_reason()
    if why is not None:
        _skip_or_fail(why)

    def path(
        delay: Union[str, float] = "15ms",
        loss: Union[str, float, None] = None,
        rate: Optional[str] = None,
        **options: Union[str, float],
    ) -> str:
        """``delay`` each way (``"15ms"``, or a number of ms); ``loss`` in percent (``"1%"``
        or ``1``); ``rate`` as tcpdoctor takes it (``"10mbit"``); other docs/wan.md options
        by name (``jitter="2ms"``, ``mtu=1400``, ``seed=7``)."""
        parts = [f"{delay:g}ms" if isinstance(delay, (int, float)) else str(delay)]
        if loss is not None:
            parts.append(f"loss={loss:g}%" if isinstance(loss, (int, float)) else f"loss={loss}")
        if rate is not None:
            parts.append(f"rate={rate}")
        parts += [f"{k}={v}" for k, v in options.items()]
        return "wan:" + ",".join(parts)

    return path
