"""deploy/*.service: checked by the machine's own `systemd-analyze verify` (the units
as shipped name /opt/strandline/venv; here they point at this checkout's venv), and the
broker unit's ExecStart must be a `strandline` command line that parses."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SHIPPED_VENV = "/opt/strandline/venv"
VENV = Path(sys.executable).parent.parent


def units(tmp_path: Path) -> list[Path]:
    """The units with the install path replaced by this checkout's venv."""
    out = []
    for unit in sorted(DEPLOY.glob("*.service")):
        target = tmp_path / unit.name
        target.write_text(unit.read_text().replace(SHIPPED_VENV, str(VENV)))
        out.append(target)
    return out


def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("needs `systemd-analyze` (Debian's systemd package)", pytrace=False)
    found = units(tmp_path)
    assert [u.name for u in found] == ["strandline-broker@.service", "strandline-zookeeper.service"]
    done = subprocess.run(
        [analyze, "verify", *map(str, found)], capture_output=True, text=True, check=False
    )
    # Unknown keys are only warnings (exit 0): any output at all is a finding.
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    broken = tmp_path / "broken@.service"
    broken.write_text(found[0].read_text().replace("KillMode=", "KilMode="))
    done = subprocess.run([analyze, "verify", str(broken)], capture_output=True, text=True)
    assert "Unknown key 'KilMode'" in done.stderr, "verify must catch a misspelt key"


def test_broker_unit_runs_a_real_strandline_command(tmp_path: Path) -> None:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(DEPLOY / "strandline-broker@.service")
    assert parser.sections() == ["Unit", "Service", "Install"]
    service = parser["Service"]
    assert service["KillSignal"] == "SIGTERM", "SIGTERM is what starts a controlled shutdown"
    assert int(service["TimeoutStopSec"]) >= 30
    assert int(service["LimitNOFILE"]) >= 65536
    assert parser["Install"]["WantedBy"] == "multi-user.target"
    argv = shlex.split(service["ExecStart"])
    assert argv[0] == f"{SHIPPED_VENV}/bin/strandline"
    assert argv[1:] == ["broker", "--config", "/etc/strandline/broker-%i.properties"]
    # The same arguments to this checkout's CLI: an unknown command or option would fail
    # parsing before --help is honoured.
    cli = VENV / "bin" / "strandline"
    done = subprocess.run(
        [str(cli), *argv[1:], "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and "--config" in done.stdout, done.stderr
    bad = subprocess.run([str(cli), "broker", "--konfig", "x"], capture_output=True, text=True)
    assert bad.returncode != 0
