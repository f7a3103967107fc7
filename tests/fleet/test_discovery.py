"""mDNS/DNS-SD: the TXT record always; advertise and browse where loopback multicast works."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import wait_for
from remote_helpers import (
    READ,
    fleet_config,
    llamactl,
    loopback_multicast_works,
    remote_daemon,
    scratch_dir,
    write_token,
)

from llamad import __version__
from llamad.fleet import discovery
from llamad.fleet.discovery import SERVICE_TYPE, Found, browse, build_txt, parse_txt


def test_txt_record_round_trip() -> None:
    txt = build_txt("0.1.0", "version: 4321 (abcdef)", tls=True)
    assert txt == {"v": "0.1.0", "llama": "4321 (abcdef)", "tls": "1"}
    raw = {k.encode(): v.encode() for k, v in txt.items()}
    found = parse_txt(f"studio:7777.{SERVICE_TYPE}", "192.0.2.7", 7777, raw)
    assert found == Found("studio:7777", "192.0.2.7", 7777, "0.1.0", "4321 (abcdef)", True)
    assert found.url == "https://192.0.2.7:7777"
    plain = parse_txt("x", "fe80::1", 7777, {b"v": b"0.1.0", b"tls": b"0", b"junk": None})
    assert (plain.url, plain.llama, plain.tls) == ("http://[fe80::1]:7777", None, False)
    long = build_txt("0.1.0", "x" * 400, tls=False)["llama"]
    assert len(("llama=" + long).encode()) == 255  # one TXT string holds at most 255 bytes


@pytest.fixture
def base() -> Iterator[Path]:
    with scratch_dir() as path:
        yield path


@pytest.mark.timeout(60)
def test_advertise_and_browse_on_loopback(
    tiny_model: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    base: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("zeroconf", reason="zeroconf is not installed")
    why = loopback_multicast_works()
    if why:
        pytest.skip(why)
    daemon, url = remote_daemon(base, tiny_model, advertise=True)
    try:

        def advertised() -> bool:
            failed = daemon.events("discovery.failed")
            if failed:
                pytest.skip(f"mDNS advertising failed here: {failed[0].get('error')}")
            return bool(daemon.events("discovery.advertising"))

        wait_for(advertised, 10, "the daemon to advertise")
        port = int(url.rsplit(":", 1)[1])
        found = [f for f in browse(1.0, "127.0.0.1") if f.port == port]
        assert len(found) == 1
        assert (found[0].url, found[0].version, found[0].tls) == (url, __version__, False)
        assert found[0].llama  # llama-server's build, as the daemon read it

        # llamactl sees only this test's daemon: other suites' daemons advertise on
        # loopback too, and their states are not this test's to assert.
        monkeypatch.setattr(
            discovery, "browse", lambda *a: [f for f in browse(*a) if f.port == port]
        )

        # llamactl: --discover adds it to the fleet; the token still comes from the user.
        token = str(write_token(tmp_path / "read.tok", READ))
        config = str(fleet_config(tmp_path / "c.toml", {}))
        argv = ["--config", config, "fleet", "status", "--json", "--discover"]
        argv += ["--mdns-interface", "127.0.0.1", "--token-file", token]
        code, out, err = llamactl(capsys, *argv)
        hosts = json.loads(out)["hosts"]
        assert (code, err) == (0, "")
        assert [(h["source"], h["host"], h["url"], h["reachable"]) for h in hosts] == [
            ("mdns", found[0].name, url, True)
        ]

        # A found llamad that refuses the token is someone else's: listed, never a failure.
        stranger = str(write_token(tmp_path / "stranger.tok", "not-" + READ))
        argv[-1] = stranger
        code, out, err = llamactl(capsys, *argv)
        hosts = json.loads(out)["hosts"]
        assert (code, err) == (0, "")
        assert [(h["url"], h["reachable"], h["refused"]) for h in hosts] == [(url, False, True)]
        code, out, err = llamactl(capsys, *[a for a in argv if a != "--json"])
        assert (code, err) == (0, "")
        assert out.splitlines()[1].split()[:3] == [found[0].name, "-", "refused"]
        assert "(found by mDNS: not in the exit code)" in out

        # `[fleet] discover = true` (and mdns_interface): the same without the flags.
        keys = {"discover": True, "mdns_interface": "127.0.0.1", "token_file": token}
        config = str(fleet_config(tmp_path / "d.toml", {}, **keys))
        code, out, err = llamactl(capsys, "--config", config, "fleet", "status", "--json")
        hosts = json.loads(out)["hosts"]
        assert (code, err, [(h["source"], h["url"]) for h in hosts]) == (0, "", [("mdns", url)])
    finally:
        assert daemon.stop() == 0
    # The goodbye went out: nothing answers for it any more.
    assert not [f for f in browse(0.5, "127.0.0.1") if f.port == port]
