"""`llamactl fleet status` and `--host` across real daemons on loopback, version skew,
Tailscale through a stand-in `tailscale` executable, and the CLI's import budget."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import Llamad, import_probe
from remote_helpers import (
    ADMIN,
    READ,
    StubController,
    TcpStub,
    fleet_config,
    llamactl,
    remote_daemon,
    scratch_dir,
    write_token,
)

from llamad.cli import fleet_status as fleet
from llamad.config.load import check
from llamad.fleet.peers import load_fleet

HEAVY = ("httpx", "pydantic", "starlette", "structlog", "psutil", "httptools", "zeroconf")


@pytest.fixture
def pair(tiny_model: Path) -> Iterator[tuple[tuple[Llamad, str], tuple[Llamad, str]]]:
    """Two daemons, each with its own socket, state dir and TCP port on 127.0.0.1."""
    with scratch_dir() as base_a, scratch_dir() as base_b:
        a = remote_daemon(base_a, tiny_model)
        try:
            b = remote_daemon(base_b, tiny_model)
        except BaseException:
            a[0].close()
            raise
        yield a, b
        for daemon, _ in (a, b):
            if daemon.proc.poll() is None:
                os.kill(daemon.proc.pid, signal.SIGCONT)
            daemon.stop()


def rows(out: str) -> list[list[str]]:
    """The table's rows (header excluded), split into cells."""
    lines = out.splitlines()
    assert lines[0].split() == ["HOST", *fleet.table.COLUMNS]
    return [line.split() for line in lines[1:] if line.split()[0] in ("a", "b", "local")]


@pytest.mark.timeout(90)
def test_fleet_status_across_two_daemons(
    pair: tuple[tuple[Llamad, str], tuple[Llamad, str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (a, a_url), (b, b_url) = pair
    token = write_token(tmp_path / "fleet.tok", ADMIN)
    config = str(fleet_config(tmp_path / "ctl.toml", {"a": {"url": a_url}, "b": {"url": b_url}}))
    config_arg = ["--config", config]
    # No token anywhere: both hosts refuse, and the command says so with exit 4.
    code, out, _ = llamactl(capsys, *config_arg, "fleet", "status")
    assert code == 4
    assert "a: http://127.0.0.1" in out
    assert "refused the token (unauthorized)" in out

    peers = {"a": {"url": a_url}, "b": {"url": b_url}}
    config = str(fleet_config(tmp_path / "ctl.toml", peers, token_file=token))
    code, out, err = llamactl(capsys, "--config", config, "fleet", "status")
    assert (code, err) == (0, "")
    assert [r[:3] for r in rows(out)] == [["a", "tiny", "running"], ["b", "tiny", "running"]]
    assert "warning" not in out  # the same llamad and llama.cpp on both
    code, out, _ = llamactl(capsys, "--config", config, "fleet", "status", "--json")
    doc = json.loads(out)
    assert code == 0
    assert [(h["host"], h["reachable"], h["source"]) for h in doc["hosts"]] == [
        ("a", True, "config"),
        ("b", True, "config"),
    ]
    assert doc["hosts"][1]["status"]["daemon"]["pid"] == b.proc.pid
    assert doc["skew"] == {}

    # The local daemon (through its socket) comes first, as "local".
    code, out, _ = llamactl(capsys, "--config", config, "--socket", str(a.socket), "fleet")
    assert code == 0
    assert [r[0] for r in rows(out)] == ["local", "a", "b"]

    # --host NAME: status and restart on b, over TCP with the [fleet] token.
    code, out, _ = llamactl(capsys, "--config", config, "--host", "b", "status", "--json")
    assert (code, json.loads(out)["daemon"]["pid"]) == (0, b.proc.pid)
    old = b.instance("tiny")["pid"]
    code, out, _ = llamactl(capsys, "--config", config, "--host", "b", "restart", "tiny")
    assert (code, out) == (0, f"tiny: running (pid {b.instance('tiny')['pid']})\n")
    assert b.instance("tiny")["pid"] != old
    assert a.instance("tiny")["pid"] == a.running("tiny")  # a untouched
    code, out, _ = llamactl(capsys, "--config", config, "--host", "b", "logs", "tiny", "-n", "5")
    log = (b.config.parent / "state" / "logs" / "tiny.log").read_text()
    assert code == 0
    assert out.splitlines()[0] in log.splitlines()  # llama-server's own output, over TCP

    # A host that accepts connections but never answers: shown unreachable by the deadline.
    os.kill(b.proc.pid, signal.SIGSTOP)
    try:
        argv = ["--config", config, "fleet", "status", "--timeout", "1"]
        proc = subprocess.run(
            [sys.executable, "-m", "llamad.cli.main", *argv],
            capture_output=True,
            text=True,
            timeout=20,
        )
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)
    assert proc.returncode == 4
    # The 1 s deadline fired (the subprocess timeout is only the test's own guard).
    states = {r[0]: r[2] for r in rows(proc.stdout)}
    assert states == {"a": "running", "b": "unreachable"}
    assert "timed out after 1s" in proc.stdout or "no answer within 1s" in proc.stdout

    # A host that is gone: refused at once.
    assert b.stop() == 0
    code, out, _ = llamactl(capsys, "--config", config, "fleet", "status", "--timeout", "1")
    assert code == 4
    assert "b: cannot reach llamad at http://127.0.0.1" in out
    assert "Connection refused" in out


def test_version_skew_and_not_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = TcpStub(StubController("0.2.0", "version: 4400 (ffffff)"))
    old = TcpStub(StubController("0.1.0", "version: 4321 (abcdef)"))
    same = TcpStub(StubController("0.1.0", "version: 4321 (abcdef)", state="failed"))
    try:
        token = write_token(tmp_path / "t", READ)
        peers = {"new": {"url": new.url}, "old": {"url": old.url}, "same": {"url": same.url}}
        config = str(fleet_config(tmp_path / "c.toml", peers, token_file=token))
        code, out, _ = llamactl(capsys, "--config", config, "fleet", "status")
        assert code == 3  # every host answered; one instance is not running
        assert "warning: llamad versions differ: 0.2.0 on new; 0.1.0 on old, same" in out
        assert "warning: llama.cpp builds differ: 4400 (ffffff) on new; 4321" in out
        code, out, _ = llamactl(capsys, "--config", config, "fleet", "status", "--json")
        skew = json.loads(out)["skew"]
        assert skew["llamad"] == {"0.2.0": ["new"], "0.1.0": ["old", "same"]}
        assert skew["llama_server"] == {"4400 (ffffff)": ["new"], "4321 (abcdef)": ["old", "same"]}
    finally:
        for stub in (new, old, same):
            stub.stop()


TAILSCALE_JSON = {
    "Self": {"HostName": "me", "TailscaleIPs": ["100.64.0.1"], "Tags": ["tag:llamad"]},
    "Peer": {
        "nodekey:1": {
            "HostName": "studio",
            "DNSName": "studio.tail1234.ts.net.",
            "TailscaleIPs": ["127.0.0.1", "fd7a:115c:a1e0::1"],
            "Tags": ["tag:llamad"],
            "Online": True,
        },
        "nodekey:2": {"HostName": "phone", "TailscaleIPs": ["127.0.0.2"], "Online": True},
        "nodekey:3": {
            "HostName": "mini",
            "TailscaleIPs": ["127.0.0.3"],
            "Tags": ["tag:llamad", "tag:other"],
            "Online": False,
        },
    },
}


def test_tailscale_peers_from_a_stand_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = TcpStub(StubController("0.1.0", "version: 1 (a)"))
    try:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        canned = tmp_path / "status.json"
        canned.write_text(json.dumps(TAILSCALE_JSON))
        exe = bin_dir / "tailscale"
        exe.write_text(f'#!/bin/sh\n[ "$1 $2" = "status --json" ] || exit 9\ncat "{canned}"\n')
        exe.chmod(0o755)
        token = write_token(tmp_path / "t", ADMIN)
        fleet_keys = {"token_file": token, "tailscale_tag": "tag:llamad"}
        config = str(fleet_config(tmp_path / "c.toml", {}, tailscale_port=stub.port, **fleet_keys))

        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        code, out, err = llamactl(capsys, "--config", config, "fleet", "status", "--json")
        hosts = {h["host"]: h for h in json.loads(out)["hosts"]}
        assert (code, err) == (4, "")  # mini is offline
        assert set(hosts) == {"studio", "mini"}  # phone lacks the tag
        assert hosts["studio"]["url"] == f"http://127.0.0.1:{stub.port}"
        assert hosts["studio"]["source"] == "tailscale"
        assert hosts["studio"]["status"]["instances"][0]["name"] == "stub"
        mini = hosts["mini"]
        assert (mini["reachable"], mini["error"]) == (False, "offline in Tailscale")
        # --host with a tailnet name, for a read and a command.
        assert llamactl(capsys, "--config", config, "--host", "studio", "status")[0] == 0
        code, out, _ = llamactl(capsys, "--config", config, "--host", "studio", "restart", "stub")
        assert (code, out) == (0, "stub: running (pid 101)\n")

        # No tailscale command: no peers from it, and not a word about it.
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
        code, out, err = llamactl(capsys, "--config", config, "fleet", "status", "--json")
        assert (code, json.loads(out)["hosts"], err) == (0, [], "")
    finally:
        stub.stop()


def test_unknown_host_and_bad_fleet_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(fleet_config(tmp_path / "c.toml", {"a": {"url": "http://127.0.0.1:1"}}))
    code, _, err = llamactl(capsys, "--config", config, "--host", "nope", "status")
    assert (code, err) == (2, "llamactl: no peer named 'nope' in [fleet] (peers: a)\n")
    bad = tmp_path / "bad.toml"
    bad.write_text('[[fleet.peers]]\nname = "x"\nurl = "ftp://x"\n')
    code, _, err = llamactl(capsys, "--config", str(bad), "fleet", "status")
    assert code == 2
    assert "fleet.peers[0].url: must start with http:// or https://" in err
    readable = write_token(tmp_path / "open.tok", ADMIN, mode=0o644)
    argv = ["--host", "http://127.0.0.1:1", "--token-file", str(readable), "status"]
    code, _, err = llamactl(capsys, *argv)
    assert code == 2
    assert "is accessible by group or others" in err


def test_fleet_status_imports_no_heavy_modules(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "c.toml", {"gone": {"url": "http://127.0.0.1:1"}})
    out = import_probe(["--config", str(config), "fleet", "status", "--json"], HEAVY)
    assert json.loads(out.stdout.splitlines()[-1]) == [4, []]


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        (
            '[[fleet.peers]]\nname = "a"\nurl = "http://a:1"\ntokn_file = "t"\n',
            "fleet.peers[0].tokn_file: unknown key 'tokn_file' (did you mean token_file?)",
        ),
        (
            '[[fleet.peers]]\nname = "a"\nurl = "http://a:1"\n'
            '[[fleet.peers]]\nname = "a"\nurl = "http://b:1"\n',
            "fleet.peers[1].name: peer names must be unique: 'a' is used twice",
        ),
        ("[fleet]\ntimeout = 0\n", "fleet.timeout: must be a positive number of seconds (got 0)"),
        ('[fleet]\ndiscover = "yes"\n', "fleet.discover: must be true or false (got 'yes')"),
        (
            '[fleet]\nmdns_interface = "eth0"\n',
            "fleet.mdns_interface: must be an IP address like '127.0.0.1' (got 'eth0')",
        ),
    ],
)
def test_llamactl_and_llamad_refuse_the_same_fleet_table(
    tmp_path: Path, toml: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One parser: llamactl's first problem is the daemon's, which also has the line."""
    config = tmp_path / "c.toml"
    config.write_text(toml)
    code, _, err = llamactl(capsys, "--config", str(config), "fleet", "status")
    assert (code, err) == (2, f"llamactl: {config}: {problem}\n")
    lines = check(config)
    assert len(lines) == 1
    where, _, said = lines[0].partition(": ")
    assert said == problem
    file, _, line = where.rpartition(":")
    assert (file, line.isdigit()) == (str(config), True)  # file:line


def test_llamactl_reads_fleet_paths_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llamactl takes `[fleet]` file paths from the config's directory, as llamad does."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "llamad.toml").write_text(
        '[fleet]\ntoken_file = "fleet.tok"\n\n'
        '[[fleet.peers]]\nname = "a"\nurl = "https://a:7777"\nca_file = "certs/a.pem"\n'
    )
    monkeypatch.chdir("/")
    loaded = load_fleet(str(conf / "llamad.toml"))
    assert loaded.token_file == conf / "fleet.tok"
    assert loaded.peers[0].ca_file == conf / "certs" / "a.pem"


def test_fleet_defaults_fill_in_what_a_peer_lacks(tmp_path: Path) -> None:
    """`[fleet] token_file` and `gateway_key_file` serve peers without their own."""
    config = fleet_config(
        tmp_path / "c.toml",
        {"a": {"url": "http://a:1"}, "b": {"url": "http://b:1", "gateway_key_file": "b.key"}},
        token_file="fleet.tok",
        gateway_key_file="fleet.key",
        discover=True,
        mdns_interface="127.0.0.1",
    )
    fleet = load_fleet(str(config))
    a, b = (fleet.with_defaults(p) for p in fleet.peers)
    assert (a.token_file, a.gateway_key_file) == (tmp_path / "fleet.tok", tmp_path / "fleet.key")
    assert (b.token_file, b.gateway_key_file) == (tmp_path / "fleet.tok", tmp_path / "b.key")
    assert (fleet.discover, fleet.mdns_interface) == (True, "127.0.0.1")
