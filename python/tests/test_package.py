"""The package: version, binary, `python -m tcpdoctor`, analyze/run/inspect and their errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import tcpdoctor
from tcpdoctor import TcpdoctorError

from conftest import LINE


def crate_version(repo: Path) -> str:
    text = (repo / "Cargo.toml").read_text()
    section = text.split("[workspace.package]", 1)[1]
    m = re.search(r'^version\s*=\s*"([^"]+)"', section, re.M)
    assert m, "the workspace version in Cargo.toml"
    return m.group(1)


def test_versions_agree(repo):
    out = subprocess.run(
        [sys.executable, "-m", "tcpdoctor", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"tcpdoctor {tcpdoctor.__version__}"
    assert tcpdoctor.__version__ == crate_version(repo)


def test_python_m_passes_the_exit_code_and_stderr():
    out = subprocess.run(
        [sys.executable, "-m", "tcpdoctor", "analyze", "--no-such-flag"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "--no-such-flag" in out.stderr


@pytest.mark.skipif(
    not os.environ.get("TCPDOCTOR_EXPECT_WHEEL"), reason="only where the suite runs from the wheel"
)
def test_the_binary_and_package_are_the_wheels():
    scripts = sysconfig.get_path("scripts")
    assert tcpdoctor.find_tcpdoctor_bin() == os.path.join(scripts, "tcpdoctor")
    assert "site-packages" in tcpdoctor.__file__, tcpdoctor.__file__
    assert (Path(tcpdoctor.__file__).parent / "py.typed").is_file()


def test_tcpdoctor_bin_overrides(monkeypatch, tmp_path):
    monkeypatch.setenv("TCPDOCTOR_BIN", str(tmp_path / "nothing"))
    with pytest.raises(tcpdoctor.BinaryNotFound, match="TCPDOCTOR_BIN=.*nothing"):
        tcpdoctor.find_tcpdoctor_bin()


def test_analyze_names_the_stall_and_not_in_the_fixed_capture(repo):
    r = tcpdoctor.analyze(repo / "testdata/captures/nagle_perline_server.pcap")
    assert r.exit_code == 0
    nagle = [f for f in r.findings if f.kind == "nagle_delayed_ack"]
    assert nagle, [f.kind for f in r.findings]
    f = nagle[0]
    assert f.severity in ("warning", "critical")
    assert f.time_lost_ms > 0 and f.evidence.facts and f.evidence.frames and f.fix
    assert f.raw["kind"] == "nagle_delayed_ack"
    with pytest.raises(AssertionError) as e:
        r.assert_no_finding("nagle_delayed_ack")
    assert f.verdict in str(e.value) and f.fix in str(e.value) and "frames: " in str(e.value)

    fixed = tcpdoctor.analyze(repo / "testdata/captures/nagle_perline_server_fixed.pcap")
    assert "nagle_delayed_ack" not in [f.kind for f in fixed.findings]
    fixed.assert_no_finding("nagle_delayed_ack")


def test_analyze_of_a_bad_capture_raises_naming_the_file(tmp_path):
    bad = tmp_path / "not-a-capture.pcap"
    bad.write_bytes(b"this is not a capture file\n" * 4)
    with pytest.raises(TcpdoctorError) as e:
        tcpdoctor.analyze(bad)
    assert e.value.returncode == 2
    assert "not-a-capture.pcap" in e.value.message


def test_analyze_fail_on_is_a_report_not_an_error(repo):
    r = tcpdoctor.analyze(
        repo / "testdata/captures/nagle_perline_server.pcap", fail_on=["nagle_delayed_ack"]
    )
    assert r.exit_code == 1
    assert any(f.kind == "nagle_delayed_ack" for f in r.findings)


def test_run_rejects_bad_input_with_the_tools_message(lines_server):
    with pytest.raises(TcpdoctorError) as e:
        tcpdoctor.run(
            target="127.0.0.1:1",
            preset="line",
            params=LINE,
            scenarios=["nowhere"],
            timeout_s=120,
        )
    assert e.value.returncode == 2
    assert "nowhere" in e.value.message


def test_a_server_that_refuses_to_start_is_a_clear_error(tmp_path):
    # It prints why and exits at once: run must say so (exit 2), not wait, not report nothing.
    server = f"{sys.executable} -c \"import sys; sys.exit('config.toml: no such file')\""
    with pytest.raises(TcpdoctorError) as e:
        tcpdoctor.run(
            server=server,
            target="127.0.0.1:9",
            preset="line",
            params=LINE,
            out=tmp_path / "files",
            timeout_s=120,
        )
    assert e.value.returncode == 2
    assert "config.toml: no such file" in e.value.message


def test_a_failed_gate_is_a_report_that_says_why(lines_server, tmp_path):
    port = free_port()
    r = tcpdoctor.run(
        server=f"{sys.executable} {lines_server} {port} per-line",
        target=f"127.0.0.1:{port}",
        preset="line",
        params=LINE,
        requests=20,
        fail_on=["nagle_delayed_ack"],
        out=tmp_path / "files",
        timeout_s=300,
    )
    assert r.exit_code == 1 and r.failed and r.result == "failed"
    assert any("nagle_delayed_ack" in why for why in r.reasons), r.reasons
    assert r.failed_on and "nagle_delayed_ack" in r.failed_on[0]
    assert r.scenarios[0].figures.exchanges == 20
    with pytest.raises(AssertionError, match="nagle_delayed_ack"):
        r.assert_passed()


def test_inspect_reads_a_live_server(lines_server):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(lines_server), str(port), "whole"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert "listening" in proc.stdout.readline()
        r = tcpdoctor.inspect(pid=proc.pid, duration="0", timeout_s=120)
        assert r.exit_code == 0
        assert r.processes and r.raw["observation"]["processes"][0]["pid"] == proc.pid
    finally:
        proc.terminate()
        proc.wait()


def test_inspect_of_no_such_process_raises():
    with pytest.raises(TcpdoctorError) as e:
        tcpdoctor.inspect(pid=2**22 + 12345, duration="0", timeout_s=120)
    assert e.value.returncode == 2
    assert str(2**22 + 12345) in e.value.message


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_output_that_is_not_a_report_raises(monkeypatch, tmp_path):
    # A binary that exits 0 printing no report (or one that dies) is an error, never an empty
    # report.
    fake = tmp_path / "tcpdoctor"
    fake.write_text("#!/bin/sh\necho 'half a line' ; echo 'something odd' >&2\nexit ${FAKE_CODE:-0}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("TCPDOCTOR_BIN", str(fake))
    with pytest.raises(TcpdoctorError, match="without a JSON report.*something odd"):
        tcpdoctor.analyze(tmp_path / "x.pcap")
    monkeypatch.setenv("FAKE_CODE", "101")
    with pytest.raises(TcpdoctorError, match="something odd") as e:
        tcpdoctor.analyze(tmp_path / "x.pcap")
    assert e.value.returncode == 101
