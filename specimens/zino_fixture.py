#!/usr/bin/env python3
"""An offline Zino 2 for tests: a working directory holding what stock `zino` needs to start
with no SNMP device, no SNMP agent and no trap port, and N open cases to walk.

Run it with the Python of the venv that has zino installed (it builds the cases with zino's
own models, so the state file is valid for that very version):

    VENV/bin/python specimens/zino_fixture.py DIR [--cases 100] [--user bench]
        [--secret bench-secret]

then start stock zino in DIR (its API port is fixed at 8001 on all addresses: run it in its
own network namespace, e.g. `tcpdoctor run --sandbox` or `tcpdoctor sandbox`):

    cd DIR && VENV/bin/zino --config-file zino.toml --polldevs polldevs.cf --trap-port 0

Files written: zino.toml (authentication file, state file, polling file, SNMP agent off),
secrets ("USER SECRET"), an empty polldevs.cf, zino-state.json with the cases (each with a
few log and history lines, as the legacy API's GETLOG and GETHIST return them).
"""

import argparse
import datetime
import pathlib
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=pathlib.Path)
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--user", default="bench")
    ap.add_argument("--secret", default="bench-secret")
    a = ap.parse_args()
    try:
        from zino.state import ZinoState
        from zino.statemodels import EventState, ReachabilityEvent, ReachabilityState
    except ImportError as e:
        print(f"zino_fixture: run me with the Python of a venv that has zino: {e}", file=sys.stderr)
        return 2
    d = a.dir
    d.mkdir(parents=True, exist_ok=True)
    (d / "secrets").write_text(f"{a.user} {a.secret}\n")
    (d / "polldevs.cf").write_text("# no devices: an offline Zino\n")
    (d / "zino.toml").write_text(
        "[authentication]\nfile = \"secrets\"\n\n"
        "[persistence]\nfile = \"zino-state.json\"\nperiod = 60\n\n"
        "[polling]\nfile = \"polldevs.cf\"\nperiod = 60\n\n"
        "[snmp.agent]\nenabled = false\n"
    )
    state = ZinoState()
    opened = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    for i in range(a.cases):
        router = f"router-{i:03d}"
        ev = state.events.create_event(router, None, ReachabilityEvent)
        ev.opened = opened + datetime.timedelta(minutes=i)
        ev.reachability = ReachabilityState.NORESPONSE
        ev.polladdr = f"198.18.{i // 250}.{i % 250 + 1}"
        ev.priority = 500
        ev.set_state(EventState.OPEN)
        for k in range(3):
            ev.add_log(f"{router} no-response (poll {k + 1} of 3)")
        ev.add_history(f"case opened for {router}; watching")
        state.events.commit(ev)
    state.dump_state_to_file(str(d / "zino-state.json"))
    print(f"zino_fixture: {d}: {a.cases} open cases, user {a.user}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
