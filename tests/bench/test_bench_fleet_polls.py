"""The polls bench's stand-in peers: a whole status document that changes at every ask,
and a peer document with an ETag that answers 304 to it; their counts leave out the
bench's own reads."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
from helpers import free_port

from bench import status_stand_in


def test_the_stand_in_answers_as_a_llamad_would() -> None:
    counts, port = free_port(), free_port()
    argv = [sys.executable, "-m", "bench.status_stand_in", str(counts), str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as peer:
            one, two = peer.get("/v1/status"), peer.get("/v1/status")
            assert one.json()["daemon"]["uptime_s"] != two.json()["daemon"]["uptime_s"]
            assert 4000 < len(one.content) < 8000  # a real llamad's with four instances
            first = peer.get("/v1/fleet")
            assert first.status_code == 200
            again = peer.get("/v1/fleet", headers={"If-None-Match": first.headers["etag"]})
            assert again.status_code == 304
            assert again.content == b""
        said = httpx.get(f"http://127.0.0.1:{counts}/counts", timeout=5).json()
        assert said["requests"] == 4
        assert said["not_modified"] == 1
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_the_peer_document_is_what_the_status_says() -> None:
    """The stand-in's peer document is a part of its status document, as llamad's is."""
    whole, part = json.loads(status_stand_in.status(3)), json.loads(status_stand_in.fleet(3))
    assert [i["name"] for i in part["instances"]] == [i["name"] for i in whole["instances"]]
    assert part["gateway"]["listen"] == whole["gateway"]["listen"]
    assert part["daemon"]["pid"] == whole["daemon"]["pid"]
