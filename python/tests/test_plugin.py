"""The pytest plugin against real servers: asyncio_lines.py writing one transport.write() per
line (Nagle on, from socket.create_server()) fails the example test with the finding's own
text; the same server writing each response once passes; the README's example runs verbatim."""

from __future__ import annotations

import os
import re
import shutil
import sys

import pytest

from tcpdoctor._report import RunReport

from conftest import LINE, REPO, SERVER


def readme_example() -> str:
    """The first ```python block of README.md's "## Python" section."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Python\n", 1)
    assert len(section) == 2, "README.md has a '## Python' section"
    m = re.search(r"```python\n(.*?)```", section[1], re.S)
    assert m, "a ```python block in README.md's Python section"
    return m.group(1)


def outcome(result) -> dict:
    return result.parseoutcomes()


def wan_required() -> bool:
    return os.environ.get("TCPDOCTOR_REQUIRE_WAN", "0") != "0"


def run_example(pytester, source: str):
    """Runs `source` as a test file in a pytest subprocess, with asyncio_lines.py beside it
    (the plugin comes in through its entry point, as for any user)."""
    shutil.copy(SERVER, pytester.path / "asyncio_lines.py")
    pytester.makepyfile(test_example=source)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", timeout=600)


def assert_names_the_stall(text: str) -> None:
    assert "tcpdoctor found nagle_delayed_ack" in text, text
    assert re.search(r"frames: \d+(, \d+)*", text), text
    assert "fix: " in text and "TCP_NODELAY" in text, text
    assert "evidence:" in text, text


def test_per_line_server_fails_with_the_finding(tcpdoctor_run):
    report = tcpdoctor_run(f"{sys.executable} {SERVER} {{port}} per-line", preset="line", params=LINE)
    assert report.exit_code == 0 and not report.failed
    assert report.scenarios[0].figures.exchanges == 20
    with pytest.raises(AssertionError) as e:
        report.assert_no_finding("nagle_delayed_ack")
    assert_names_the_stall(str(e.value))


def test_whole_response_server_passes(tcpdoctor_run):
    report = tcpdoctor_run(f"{sys.executable} {SERVER} {{port}} whole", preset="line", params=LINE)
    assert report.scenarios[0].figures.exchanges == 20
    assert "nagle_delayed_ack" not in [f.kind for f in report.findings]
    report.assert_no_finding("nagle_delayed_ack")


def test_the_failing_example_test_explains_itself_in_the_log(pytester):
    # A user's test over the direct path (no WAN needed): its pytest output is the finding.
    result = run_example(
        pytester,
        "def test_rows(tcpdoctor_run):\n"
        "    report = tcpdoctor_run('python3 asyncio_lines.py {port} per-line', preset='line',\n"
        f"                           params={LINE!r})\n"
        "    report.assert_no_finding('nagle_delayed_ack')\n",
    )
    assert outcome(result) == {"failed": 1}, result.stdout.str()
    assert_names_the_stall(result.stdout.str())


def test_readme_example_passes_verbatim(pytester):
    example = readme_example()
    assert "asyncio_lines.py {port} whole" in example
    result = run_example(pytester, example)
    text = result.stdout.str()
    if not wan_required() and outcome(result) == {"skipped": 1}:
        assert "no WAN path here" in text, text
        pytest.skip("the README example skipped: " + text.strip().splitlines()[-2])
    assert outcome(result) == {"passed": 1}, text


def test_readme_example_fails_on_the_per_line_server(pytester):
    # 20 exchanges are enough: every one of them stalls.
    example = readme_example().replace("{port} whole", "{port} per-line")
    example = example.replace("requests=100", "requests=20")
    result = run_example(pytester, example)
    text = result.stdout.str()
    if not wan_required() and outcome(result) == {"skipped": 1}:
        pytest.skip("no WAN path here")
    assert outcome(result) == {"failed": 1}, text
    assert_names_the_stall(text)
    # The far end's capture names it too.
    assert "(server end)" in text, text


def test_the_plugin_is_off_unless_used(pytester, monkeypatch):
    # Loaded through its entry point, but a test that does not use its fixtures runs nothing
    # of tcpdoctor's: with no binary at all it still passes.
    monkeypatch.setenv("TCPDOCTOR_BIN", str(pytester.path / "no-such-binary"))
    pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert outcome(result) == {"passed": 1}
    fixtures = pytester.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider")
    assert "tcpdoctor_run" in fixtures.stdout.str() and "wan_path" in fixtures.stdout.str()


def test_wan_path_builds_the_scenario(wan_path):
    assert wan_path() == "wan:15ms"
    assert wan_path(delay=15, loss=1, rate="10mbit") == "wan:15ms,loss=1%,rate=10mbit"
    assert wan_path(delay="5ms", loss="3%", seed=7) == "wan:5ms,loss=3%,seed=7"


# --- assert_round_trips over a crafted report (the rule, both ways, both RTT sources) -------


def report(p50: float, p99: float, rtt_ms=None, definition="wan:15ms", stalls=None) -> RunReport:
    figures = {"exchanges": 20, "p50_ms": p50, "p99_ms": p99}
    if stalls is not None:
        figures["stalls"] = stalls
    scenario = {
        "name": definition,
        "definition": definition,
        "path": "",
        "figures": figures,
        "findings": [],
    }
    if rtt_ms is not None:
        scenario["capture"] = {
            "file": "x.pcap",
            "source": "lo",
            "summary": {"servers": [{"server": "198.18.0.1:7", "exchanges": 20, "rtt_ms": rtt_ms}]},
        }
    return RunReport.from_json({"scenarios": [scenario], "failed": False})


def test_one_round_trip_passes_below_twice_the_rtt():
    report(p50=30.5, p99=33.0, rtt_ms=30.1).assert_round_trips(1)
    report(p50=30.5, p99=33.0).assert_round_trips(1)


def test_a_stall_fails_saying_which_rtt():
    with pytest.raises(AssertionError) as e:
        report(p50=104.0, p99=120.0, rtt_ms=30.1).assert_round_trips(1)
    msg = str(e.value)
    assert "p50 104 ms, p99 120 ms ≥ 2 × RTT = 60.2 ms (RTT 30.1 ms" in msg, msg
    assert "measured: the capture's round trip" in msg, msg
    with pytest.raises(AssertionError) as e:
        report(p50=104.0, p99=120.0).assert_round_trips(1)
    assert "configured: wan:15ms's delay there and back" in str(e.value)
    assert "= 60 ms" in str(e.value)
    # Two round trips allowed: 104 < 3 × 30.1 but the p99 of 120 is not.
    with pytest.raises(AssertionError, match=r"p99 120 ms ≥ 3 × RTT"):
        report(p50=104.0, p99=120.0, rtt_ms=30.1).assert_round_trips(2)


def test_a_slow_tail_fails_only_when_the_capture_blames_a_tcp_timer():
    # The machine's scheduling: one exchange late, no timer in the capture.
    report(p50=32.8, p99=63.8, rtt_ms=30.3, stalls=0).assert_round_trips(1)
    # A delayed ACK held two exchanges: the tail is a round trip too many.
    with pytest.raises(AssertionError, match=r"p99 72 ms ≥ 2 × RTT.*held 2 of the requests and responses"):
        report(p50=32.8, p99=72.0, rtt_ms=30.3, stalls=2).assert_round_trips(1)
    # Whatever the capture says, a median past the limit fails.
    with pytest.raises(AssertionError, match=r"p50 70 ms"):
        report(p50=70.0, p99=72.0, rtt_ms=30.3, stalls=0).assert_round_trips(1)


def test_round_trips_need_a_path():
    with pytest.raises(AssertionError, match="no wan: scenario"):
        report(1.0, 1.0, definition="direct").assert_round_trips(1)
    with pytest.raises(AssertionError, match="c2s=40ms,s2c=5ms"):
        report(100.0, 100.0, definition="wan:c2s=40ms,s2c=5ms").assert_round_trips(1)
    report(80.0, 85.0, definition="wan:c2s=40ms,s2c=5ms").assert_round_trips(1)
