"""Named gateway keys: config errors, 404s in each API family's shape, usage by name."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import openai
import pytest
from gateway_helpers import TINY, chat, gateway
from helpers import wait_for

from llamad.config.load import check, load

pytestmark = pytest.mark.timeout(60)

CONFIG = """
[gateway]
listen = "127.0.0.1:18999"
api_key_file = "{d}/main.key"

[gateway.keys.alice]
key_file = "{d}/alice.key"
models = ["a2"]

[gateway.keys.bob]
key_file = "{d}/bob.key"

[instances.a]
model = "{m}"
port = 18998
aliases = ["a2"]

[instances.b]
model = "{m}"
port = 18997
"""


def _keys(d: Path) -> None:
    for name in ("main", "alice", "bob"):
        (d / f"{name}.key").write_text(f"{name}-secret-0123456789\n")
        (d / f"{name}.key").chmod(0o600)


def _config(d: Path, model: Path, *change: str) -> Path:
    _keys(d)
    text = CONFIG.replace("{d}", str(d)).replace("{m}", str(model))
    path = d / "llamad.toml"
    path.write_text(text.replace(*change) if change else text)
    return path


def test_named_keys_resolve(tmp_path: Path, tiny_model: Path) -> None:
    gw = load(_config(tmp_path, tiny_model)).gateway
    assert gw is not None
    named = {k.name: k.models for k in gw.keys}
    assert named == {"default": None, "alice": frozenset({"a"}), "bob": None}
    assert "secret" not in repr(gw)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ('models = ["a2"]', 'models = ["nope"]'),
            "gateway.keys.alice.models: no model named 'nope'",
        ),
        (("alice.key", "missing.key"), "gateway.keys.alice.key_file: cannot read"),
        (("bob.key", "alice.key"), "gateway.keys.bob.key_file: "),
        (("[gateway.keys.bob]", "[gateway.keys.default]"), "gateway.keys.default: 'default' is"),
    ],
    ids=["unknown model", "missing file", "same key twice", "default taken"],
)
def test_key_config_errors_are_one_line(
    tmp_path: Path, tiny_model: Path, change: tuple[str, str], expected: str
) -> None:
    found = check(_config(tmp_path, tiny_model, *change))
    assert len(found) == 1, found
    assert str(tmp_path) in found[0], found[0]
    assert expected in found[0], found[0]


def test_a_key_limited_to_some_models(tiny_model: Path, tmp_path: Path) -> None:
    _keys(tmp_path)
    keys = {
        "alice": {"key_file": str(tmp_path / "alice.key"), "models": ["a"]},
        "bob": {"key_file": str(tmp_path / "bob.key")},
    }
    with gateway(
        tiny_model, {"a": TINY, "b": TINY}, api_key_file=str(tmp_path / "main.key"), keys=keys
    ) as gw:
        alice = {"Authorization": "Bearer alice-secret-0123456789"}
        client = openai.OpenAI(base_url=f"{gw.base}/v1", api_key="alice-secret-0123456789")
        assert client.chat.completions.create(**chat("a", 2)).usage is not None
        # A model outside the key's list is one that does not exist, for this key.
        with pytest.raises(openai.NotFoundError) as refused:
            client.chat.completions.create(**chat("b", 2))
        assert refused.value.code == "model_not_found"
        assert "'b' does not exist; available: a" in str(refused.value)
        ollama = httpx.post(
            f"{gw.base}/api/chat",
            json={"model": "b", "messages": [{"role": "user", "content": "hi"}], "stream": False},
            headers=alice,
            timeout=10,
        )
        assert ollama.status_code == 404
        assert ollama.json() == {"error": 'model "b" not found'}
        listed = httpx.get(f"{gw.base}/v1/models", headers=alice, timeout=5).json()["data"]
        assert [m["id"] for m in listed] == ["a"]
        tags = httpx.get(f"{gw.base}/api/tags", headers=alice, timeout=5).json()["models"]
        assert [m["name"] for m in tags] == ["a:latest"]
        # The single api_key_file still works, as the key named "default".
        main = {"x-api-key": "main-secret-0123456789"}
        assert (
            httpx.post(
                f"{gw.base}/v1/chat/completions", json=chat("b", 2), headers=main
            ).status_code
            == 200
        )
        assert httpx.get(f"{gw.base}/v1/models", timeout=5).status_code == 401
        records = wait_for(
            lambda: (
                (r := httpx.get(f"{gw.base}/v1/activity", headers=main).json()["data"])
                and len(r) >= 4
                and r
            ),
            5,
        )
        assert [(r["key"], r["status"]) for r in records] == [
            ("default", 200), ("alice", 404), ("alice", 404), ("alice", 200),
        ]  # fmt: skip
        mine = httpx.get(f"{gw.base}/v1/activity", headers=alice, timeout=5).json()["data"]
        assert [r["instance"] for r in mine] == ["a"]
        page = httpx.get(f"{gw.base}/ui/api/status", headers=alice, timeout=5).json()
        assert list(page["gateway"]["keys"]) == ["alice"]
        assert [m["id"] for m in page["models"]] == ["a"]
        usage = gw.ld.status()["gateway"]["keys"]
        assert usage["alice"] == {
            "requests": 3, "errors": 2, "prompt_tokens": records[-1]["prompt_tokens"],
            "completion_tokens": 2,
        }  # fmt: skip
        assert "secret" not in str(gw.ld.status())


def test_a_limited_key_reads_its_models_slots_but_never_changes_them(
    tiny_model: Path, tmp_path: Path
) -> None:
    """A model's slots hold every caller's conversations and its saved files: a key
    limited to some models may look (GET) but not save, restore, erase or rescale, by
    any spelling of the path llama-server would take."""
    _keys(tmp_path)
    keys = {"alice": {"key_file": str(tmp_path / "alice.key"), "models": ["a"]}}
    with gateway(tiny_model, {"a": TINY}, api_key_file=str(tmp_path / "main.key"), keys=keys) as gw:
        alice = {"Authorization": "Bearer alice-secret-0123456789"}
        main = {"Authorization": "Bearer main-secret-0123456789"}
        looked = httpx.get(f"{gw.base}/upstream/a/slots", headers=alice, timeout=10)
        assert looked.status_code == 200
        assert [s["id"] for s in looked.json()] == [0]
        for path in (
            "/upstream/a/slots/0?action=erase",
            "/upstream/a/slots/0/?action=erase",  # llama-server takes it too
            "/upstream/a/%73lots/0?action=restore",
            "/upstream/a/lora-adapters",
        ):
            refused = httpx.post(f"{gw.base}{path}", json=[], headers=alice, timeout=10)
            assert refused.status_code == 403, path
            assert "nor a model's slots or adapters" in refused.json()["error"]["message"]
        for path in (  # decoded once by the gateway, again by llama-server (N3 of #48)
            "/upstream/a/%2573lots/0?action=erase",
            "/upstream/a/%256cora-adapters",
        ):
            other = httpx.post(f"{gw.base}{path}", json=[], headers=alice, timeout=10)
            assert other.status_code == 404, path  # llama-server's: no such path
        erased = httpx.post(f"{gw.base}/upstream/a/slots/0?action=erase", headers=main, timeout=10)
        assert erased.status_code == 200
        assert erased.json()["id_slot"] == 0


def test_a_limited_key_sees_only_its_models_stops(tmp_path: Path, tiny_model: Path) -> None:
    """The page's recent stops: a key limited to some models sees theirs, and not the name
    of a model outside its list that they made room for."""
    _keys(tmp_path)
    keys = {"alice": {"key_file": str(tmp_path / "alice.key"), "models": ["a"]}}
    lazy = {**TINY, "on_demand": True}
    with gateway(
        tiny_model,
        {"a": lazy, "b": lazy},
        api_key_file=str(tmp_path / "main.key"),
        keys=keys,
        max_loaded=1,
    ) as gw:
        main = {"x-api-key": "main-secret-0123456789"}
        alice = {"Authorization": "Bearer alice-secret-0123456789"}
        url = f"{gw.base}/v1/chat/completions"
        assert httpx.post(url, json=chat("a", 2), headers=alice, timeout=30).status_code == 200
        assert httpx.post(url, json=chat("b", 2), headers=main, timeout=30).status_code == 200

        def stops(headers: dict[str, str]) -> list[tuple[str, str | None]]:
            page = httpx.get(f"{gw.base}/ui/api/status", headers=headers, timeout=5).json()
            return [(s["model"], s["for_model"]) for s in page["gateway"]["recent_stops"]]

        assert stops(main) == [("a", "b")]
        assert stops(alice) == [("a", None)]


# Spellings of a slot or adapter change that a second decoding, or llama-server's own
# reading of a path, could turn into the real route: the door must refuse each, or it
# must reach llama-server as the very path the door decided on (a 404 there).
_SPELLINGS = (
    "/upstream/a/%2573lots/0?action=erase",
    "/upstream/a/%25%37%33lots/0?action=erase",
    "/upstream/a/%2573lots/0?action=save",
    "/upstream/a/%2573lots/0?action=restore",
    "/upstream/a/%256cora-adapters",
    "/upstream/a/%252573lots/0?action=erase",
    "/upstream/a/slots%2F0?action=erase",
    "/upstream/a/%2Fslots/0?action=erase",
    "/upstream/a/%252Fslots/0?action=erase",
    "/upstream/a/slots/0?%61ction=erase",
    "/upstream/a/slots/0?action=%65rase",
    "/upstream/a/%73lots/0?action=%2565rase",
    "/upstream/a/./slots/0?action=erase",
    "/upstream/a/%2e/slots/0?action=erase",
    "/upstream/a/x/../slots/0?action=erase",
    "/upstream/a/x/%2e%2e/slots/0?action=erase",
    "/upstream/a//slots/0?action=erase",
)


def _raw_post(base: str, target: str, headers: dict[str, str]) -> tuple[int, str]:
    """POST `target` byte for byte (httpx would normalise some of these spellings)."""
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    try:
        body = json.dumps({"filename": "mine.bin", "lora": []})
        conn.request("POST", target, body, {**headers, "Content-Type": "application/json"})
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def test_no_spelling_of_a_slot_change_passes_a_limited_key(
    tiny_model: Path, tmp_path: Path
) -> None:
    """What goes upstream is what the door decided: a double-encoded path is forwarded
    so that llama-server decodes it to the door's path, not to the slot route."""
    _keys(tmp_path)
    keys = {"alice": {"key_file": str(tmp_path / "alice.key"), "models": ["a"]}}
    with gateway(tiny_model, {"a": TINY}, api_key_file=str(tmp_path / "main.key"), keys=keys) as gw:
        alice = {"Authorization": "Bearer alice-secret-0123456789"}
        for target in _SPELLINGS:
            status, text = _raw_post(gw.base, target, alice)
            assert status in (400, 403, 404), (target, status, text)
            assert "id_slot" not in text, (target, text)
        assert not list(gw.dir.rglob("mine.bin"))
        # Even a key with every right reaches llama-server at the path the door saw: not
        # its slot route, which that path only names once decoded a second time.
        main = {"Authorization": "Bearer main-secret-0123456789"}
        status, text = _raw_post(gw.base, "/upstream/a/%2573lots/0?action=erase", main)
        assert status == 404, text
