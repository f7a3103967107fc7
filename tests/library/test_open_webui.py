"""Open WebUI's "pull a model" box, replayed as it reaches the gateway: its backend
(backend/open_webui/routers/ollama.py, `pull_model`) posts `{"name": TAG, "insecure":
true}` with aiohttp, its Bearer key and (when it forwards user info) X-OpenWebUI-User-*
headers, and relays the answer; its page (ModelSelector/Selector.svelte) splits the
stream at newlines and reads each line as JSON: `error` or `detail` fails the pull, a
line with `status` and `digest` is progress, `status` alone a notice, and `success`
the end. A refusal before the stream is read from the `error` of a JSON body."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import httpx
import pytest
from hub_stand_in import Hub
from remote_helpers import write_token

pytestmark = pytest.mark.timeout(120)

KEY = "owui-key-" + "5c2e8a" * 5
# What its backend sends with ENABLE_FORWARD_USER_INFO_HEADERS on, for an admin.
USER = {
    "X-OpenWebUI-User-Name": quote("Ada Lovelace", safe=" "),
    "X-OpenWebUI-User-Id": "0b7c6f1e-2d4a-4e8b-9a31-5f0d2c7e8b14",
    "X-OpenWebUI-User-Email": "ada@example.org",
    "X-OpenWebUI-User-Role": "admin",
}


@pytest.fixture
def gateway_extra(tmp_path: Path) -> str:
    return f'api_key_file = "{write_token(tmp_path / "gw.key", KEY)}"'


class Refused(Exception):
    """What Open WebUI shows in its error toast."""


async def open_webui_pull(base: str, tag: str) -> dict[str, Any]:
    """Pull `tag` as Open WebUI does; returns what its page ends up holding."""
    payload = json.dumps({"name": tag, "insecure": True})
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}", **USER}
    timeout = aiohttp.ClientTimeout(total=300)  # its AIOHTTP_CLIENT_TIMEOUT default
    async with (
        aiohttp.ClientSession(trust_env=True, timeout=timeout) as session,
        session.post(f"{base}/api/pull", data=payload, headers=headers) as r,
    ):
        if not r.ok:
            raise Refused((await r.json())["error"])
        return read_as_the_page_does([chunk async for chunk in r.content.iter_any()])


def read_as_the_page_does(chunks: list[bytes]) -> dict[str, Any]:
    """Selector.svelte's loop: text split at newlines across chunks, each line JSON."""
    held, seen = "", {"progress": [], "digests": set(), "toasts": [], "done": False}
    for chunk in chunks:
        *lines, held = (held + chunk.decode()).split("\n")
        for line in lines:
            if line == "":
                continue
            data = json.loads(line)
            if data.get("error"):
                raise Refused(data["error"])
            if data.get("detail"):
                raise Refused(data["detail"])
            if not data.get("status"):
                continue
            if data.get("digest"):
                done = data.get("completed")
                seen["progress"].append(round(done / data["total"] * 1000) / 10 if done else 100)
                seen["digests"].add(data["digest"])
            else:
                seen["toasts"].append(data["status"])
                seen["done"] = data["status"] == "success"
    assert held == "", "the stream ended inside a line"
    return seen


def test_open_webui_pulls_a_hugging_face_and_an_ollama_model(daemon: Any, hub: Hub) -> None:
    ld, base, _cache = daemon
    for tag in ("hf.co/someone/Tiny-GGUF:Q4_K_M", "tinyllama:1b"):
        seen = asyncio.run(open_webui_pull(base, tag))
        assert seen["done"], (tag, seen)
        assert seen["progress"][-1] == 100.0
        assert all(d.startswith("sha256:") for d in seen["digests"])
        assert seen["toasts"][0] == "pulling manifest"
        # Then it lists the models again, and the new one answers by the name typed.
        tags = httpx.get(f"{base}/api/tags", headers={"Authorization": f"Bearer {KEY}"})
        listed = [t["name"] for t in tags.json()["models"]]
        assert tag in listed
        assert len(listed) == len(set(listed)), listed  # `m` and `m:latest` listed once
        chat = {"model": tag, "messages": [{"role": "user", "content": "hi"}], "stream": False}
        reply = httpx.post(
            f"{base}/api/chat",
            json={**chat, "options": {"num_predict": 2}},
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=60,
        )
        assert reply.status_code == 200, (tag, reply.text)
    assert f"Bearer {KEY}" not in ld.stderr_path.read_text(encoding="utf-8")


def test_open_webui_shows_a_failed_pull_in_one_line(daemon: Any) -> None:
    _ld, base, _cache = daemon
    with pytest.raises(Refused) as missing:  # refused inside the stream: `error`
        asyncio.run(open_webui_pull(base, "hf.co/nobody/Missing-GGUF:Q4_K_M"))
    assert str(missing.value).startswith("nobody/Missing-GGUF: no such repository")
    with pytest.raises(Refused) as bad:  # refused before it: a JSON body's `error`
        asyncio.run(open_webui_pull(base, "no//good"))
    assert "cannot pull 'no//good'" in str(bad.value)
    assert "\n" not in str(missing.value) + str(bad.value)


def test_open_webuis_cancel_stops_the_pull(daemon: Any, hub: Hub) -> None:
    """Its Cancel aborts the stream, then deletes the model: as Ollama, the pull stops
    when nobody waits for it any more, and the model never arrives."""
    ld, base, cache = daemon
    tag, file = "hf.co/someone/Tiny-GGUF:Q8_0", "tiny-Q8_0.gguf"
    hub.hold_after[file] = 11 * 1024 * 1024
    total = len(hub.repos["someone/Tiny-GGUF"][file])

    async def pull_then_cancel() -> None:
        payload = json.dumps({"name": tag, "insecure": True})
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{base}/api/pull", data=payload, headers=headers) as r,
        ):
            async for line in r.content:
                if json.loads(line).get("total") == total:
                    break  # under way: Cancel

    asyncio.run(pull_then_cancel())
    gone = httpx.request(
        "DELETE",
        f"{base}/api/delete",
        content=json.dumps({"name": tag}),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
    )
    assert gone.status_code == 404  # nothing was pulled: Ollama's answer too
    hub.released.set()  # the download's thread reads on, and stops at its next bytes
    model = "someone/Tiny-GGUF:Q8_0"
    failed = ld.wait_event("library.pull_failed", model=model, timeout=30)
    assert failed[0]["error"] == f"{model}: pull cancelled (nobody was waiting for it any more)"
    listed = {m["name"] for m in ld.api("GET", "/v1/library")["models"]}
    assert "someone/Tiny-GGUF:Q8_0" not in listed
    assert not list((cache / "models--someone--Tiny-GGUF").rglob("*Q8_0*"))
    assert not ld.events("library.pulled")
