"""`[gateway]` and the per-instance gateway keys: resolved values and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamad.config.gateway_table import byte_size
from llamad.config.load import check, load

GOOD = """
[gateway]
listen = "127.0.0.1:18999"
max_loaded = 2
memory_budget = "24GiB"
queue_timeout = 30.0
max_queue = 8

[instances.a]
model = "{m}"
port = 18998
aliases = ["gpt-4o-mini", "a2"]

[instances.b]
model = "{m}"
port = 18997
on_demand = true
idle_timeout = 60.0
"""


def test_gateway_keys_resolve(tmp_path: Path, tiny_model: Path) -> None:
    path = tmp_path / "llamad.toml"
    path.write_text(GOOD.replace("{m}", str(tiny_model)))
    resolved = load(path)
    gw = resolved.gateway
    assert gw is not None
    assert (gw.host, gw.port, gw.max_loaded, gw.max_queue) == ("127.0.0.1", 18999, 2, 8)
    assert gw.memory_budget == 24 * 1024**3
    a, b = resolved.instances["a"], resolved.instances["b"]
    assert a.aliases == ("gpt-4o-mini", "a2")
    assert (a.on_demand, a.autostart) == (False, True)
    # On-demand instances are not started at boot.
    assert (b.on_demand, b.autostart, b.idle_timeout) == (True, False, 60.0)
    # The gateway's keys are not part of the launch: changing them restarts nothing.
    assert b.launch == b.__class__(**{**b.__dict__, "aliases": ("x",), "on_demand": False}).launch


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ('aliases = ["gpt-4o-mini", "a2"]', 'aliases = ["b"]'),
            "llamad.toml:12: instances.a.aliases: model name 'b' is instances.b",
        ),
        (
            ("idle_timeout = 60.0", 'idle_timeout = 60.0\naliases = ["a2:latest"]'),
            "llamad.toml:19: instances.b.aliases: alias 'a2:latest' is spelt 'a2' by instances.a",
        ),
        (
            ('listen = "127.0.0.1:18999"', 'listen = "127.0.0.1:18998"'),
            "llamad.toml:3: gateway.listen: port 18998 is already used by instances.a",
        ),
        (
            ('memory_budget = "24GiB"', 'memory_budget = "lots"'),
            'llamad.toml:5: gateway.memory_budget: must be "auto", "off"',
        ),
        (
            ('listen = "127.0.0.1:18999"', 'listen = "18999"'),
            "llamad.toml:3: gateway.listen: must be HOST:PORT",
        ),
        (
            ("max_queue = 8", 'max_queue = 8\nmax_body = "big"'),
            'llamad.toml:8: gateway.max_body: must be a size like "32MiB"',
        ),
        (
            ("idle_timeout = 60.0", 'idle_timeout = 60.0\nmax_body = "0"'),
            "llamad.toml:19: instances.b.max_body: must be more than 0 bytes",
        ),
        (
            ("max_queue = 8", "max_queu = 8"),
            "llamad.toml:7: gateway: unknown key 'max_queu' (did you mean max_queue?)",
        ),
        (
            ('aliases = ["gpt-4o-mini", "a2"]', 'aliases = ["b:latest"]'),
            "llamad.toml:12: instances.a.aliases: model name 'b:latest' is instances.b "
            "(Ollama reads NAME:latest as NAME)",
        ),
        (
            ('listen = "127.0.0.1:18999"', 'listen = "0.0.0.0:18999"'),
            "llamad.toml:3: gateway.listen: 0.0.0.0:18999 is reachable beyond this machine "
            "and the gateway has no api_key_file",
        ),
        (
            ("max_queue = 8", 'max_queue = 8\nallowed_origins = ["http://x/path"]'),
            "llamad.toml:8: gateway.allowed_origins: must be",
        ),
        (
            ("max_queue = 8", "max_queue = 8\nkeepalive_interval = -1"),
            "llamad.toml:8: gateway.keepalive_interval: ",
        ),
        (
            ("max_queue = 8", "max_queue = 8\naffinity_size = 0"),
            "llamad.toml:8: gateway.affinity_size: ",
        ),
        (
            ("max_queue = 8", 'max_queue = 8\naffinity = "maybe"'),
            "llamad.toml:8: gateway.affinity: ",
        ),
    ],
    ids=[
        "alias is an instance",
        "shared alias spelt two ways",
        "listen clash",
        "budget",
        "listen",
        "max_body",
        "instance max_body",
        "typo",
        "alias takes an Ollama name",
        "keyless beyond loopback",
        "origin with a path",
        "negative keep-alive interval",
        "affinity_size",
        "affinity",
    ],
)
def test_gateway_config_errors_are_one_line(
    tmp_path: Path, tiny_model: Path, change: tuple[str, str], expected: str
) -> None:
    path = tmp_path / "llamad.toml"
    path.write_text(GOOD.replace("{m}", str(tiny_model)).replace(*change))
    found = check(path)
    assert len(found) == 1, found
    assert found[0].startswith(f"{tmp_path}/{expected}"), found[0]


def test_instances_may_share_an_alias(tmp_path: Path, tiny_model: Path) -> None:
    """Two instances declaring one alias are its replicas: valid, and no warning while
    they serve the same file; the alias may still not be an instance's name."""
    path = tmp_path / "llamad.toml"
    path.write_text(
        GOOD.replace("{m}", str(tiny_model)).replace(
            "idle_timeout = 60.0", 'idle_timeout = 60.0\naliases = ["a2"]'
        )
    )
    resolved = load(path)
    assert resolved.instances["b"].aliases == ("a2",)
    assert resolved.warnings == ()
    other = tmp_path / "other.gguf"
    other.write_bytes(tiny_model.read_bytes())
    path.write_text(
        path.read_text().replace(
            f'model = "{tiny_model}"\nport = 18997', f'model = "{other}"\nport = 18997'
        )
    )
    (warning,) = load(path).warnings
    assert warning.startswith(f"{path}:19: instances.b.aliases: alias 'a2' is shared with "), (
        warning
    )


def test_sizes() -> None:
    """The spellings the docs and the example config use, as bytes."""
    assert byte_size("24GiB") == 24 * 1024**3
    assert byte_size("24G") == 24 * 10**9
    assert byte_size("512MB") == 512 * 10**6
    assert byte_size("32mib") == 32 * 1024**2
    assert byte_size("1.5 GiB") == int(1.5 * 1024**3)
    assert byte_size("1000") == 1000
    assert byte_size("many") is None


def test_body_limits_resolve(tmp_path: Path, tiny_model: Path) -> None:
    """`max_body` defaults to 32 MiB; an instance's own is in bytes; neither restarts it."""
    path = tmp_path / "llamad.toml"
    text = GOOD.replace("{m}", str(tiny_model)).replace(
        "idle_timeout = 60.0", 'idle_timeout = 60.0\nmax_body = "64MiB"'
    )
    path.write_text(text)
    resolved = load(path)
    assert resolved.gateway is not None
    assert resolved.gateway.max_body == 32 * 2**20
    assert resolved.gateway.request_timeout == 60.0
    assert resolved.gateway.trust_loopback is False
    assert resolved.gateway.keepalive_interval == 10.0
    b = resolved.instances["b"]
    assert (resolved.instances["a"].max_body, b.max_body) == (None, 64 * 2**20)
    assert b.launch == b.__class__(**{**b.__dict__, "max_body": None}).launch


def test_keyless_remote_can_be_allowed(tmp_path: Path, tiny_model: Path) -> None:
    path = tmp_path / "llamad.toml"
    text = GOOD.replace("{m}", str(tiny_model)).replace('"127.0.0.1:18999"', '"[::]:18999"')
    path.write_text(text.replace("max_queue = 8", "max_queue = 8\nallow_keyless_remote = true"))
    assert check(path) == []


def test_a_short_gateway_key_is_refused_without_showing_it(
    tmp_path: Path, tiny_model: Path
) -> None:
    key = tmp_path / "gw.key"
    key.write_text("sesame-123\n")
    key.chmod(0o600)
    path = tmp_path / "llamad.toml"
    text = GOOD.replace("{m}", str(tiny_model))
    path.write_text(text.replace("max_queue = 8", f'max_queue = 8\napi_key_file = "{key}"'))
    (line,) = check(path)
    assert line.startswith(f"{path}:8: gateway.api_key_file: the token in {key} is 10 characters")
    assert "at least 16" in line
    assert "sesame" not in line


def test_keyless_gateway_before_a_keyed_instance_is_a_warning(
    tmp_path: Path, tiny_model: Path
) -> None:
    path = tmp_path / "llamad.toml"
    text = GOOD.replace("{m}", str(tiny_model))
    path.write_text(
        text.replace("port = 18997", 'port = 18997\napi_key = "instance-key-0123456789"')
    )
    warnings: list[str] = []
    assert check(path, warnings) == []
    assert warnings == [
        f"{path}:17: instances.b.api_key: the gateway has no api_key_file, so its clients "
        "use this instance without its key"
    ]
