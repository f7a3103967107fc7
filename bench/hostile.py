"""The hostile neighbours: while an attacker on this machine works at the gateway, what a
legitimate client sees and what the daemon's memory does.

One llamad (each build's, with `--baseline`) serves the tiny model (4 slots) to two
named keys, a full one (the legitimate client's) and one limited to the tiny model, with
a stand-in `[fleet]` peer. Each attack runs in a process of its own
(`bench/hostile_attack.py`) for a bounded time, while the legitimate client on
127.0.0.1 sends 1-token `/v1/completions` and another `GET /health`, each request on a
new connection with its key; a reset or a timeout is an error, its time a sample. Rows
per attack: each one's p99 (target: under 50 ms, no errors) and the daemon's RSS growth
over the attack (target: under 20 MB). Each attack has a fresh daemon, which must first
answer `/health` within 50 ms three times running (at most `SETTLE_S`). With a
baseline, each attack runs on both builds, the order turned each attack.
"""

from __future__ import annotations

import http.client
import json
import secrets
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench import baseline
from bench.base_build import Build
from bench.common import Context, Result, http_get, instance_keys, wait_for
from bench.hostile_attack import PEER_MODEL
from bench.procs import Daemon

MODEL = "tiny"
P99_MS, RSS_MB = 50.0, 20.0
REQUEST_TIMEOUT_S = 6.0  # one legitimate request; past it an error
SETTLE_S = 10.0
PEER_LIFE_S = 900.0  # the stand-in peer's bound, past any run of the section
WRONG_KEY = "not-a-key-of-this-gateway-0123"
# (row name, attack, key the attacker sends: None, "wrong" or "limited")
ATTACKS: list[tuple[str, str, str | None]] = [
    ("N1 trailer, no key", "trailer", None),
    ("N1 trailer, wrong key", "trailer", "wrong"),
    ("N1 trailer, limited key", "trailer", "limited"),
    ("N2 peer head", "ask_peer", "full"),
    ("N4 address spread", "spread", None),
    ("N5 slow readers", "slow", "limited"),
]


@dataclass
class Seen:
    """What the legitimate client saw during one attack, and the daemon's RSS."""

    ms: dict[str, list[float]] = field(default_factory=lambda: {"completions": [], "health": []})
    errors: dict[str, int] = field(default_factory=lambda: {"completions": 0, "health": 0})
    rss_before: float = 0.0
    rss_max: float = 0.0
    in_flight: int | None = None  # the model's, the most seen while the attack ran
    stats: dict[str, int] = field(default_factory=dict)  # what the attacker counted


@dataclass
class Site:
    """One build's daemon under attack: its gateway port, its keys and its peer's port."""

    build: Build
    daemon: Daemon
    port: int
    peer_port: int
    keys: dict[str, str]
    peer: subprocess.Popen[bytes]

    def stop(self) -> None:
        self.daemon.stop()
        _end(self.peer)


def _keys(ctx: Context) -> dict[str, Path]:
    folder = ctx.root / "hostile-keys"
    folder.mkdir(mode=0o700, exist_ok=True)
    paths = {}
    for name in ("full", "limited"):
        path = paths[name] = folder / f"{name}.key"
        if not path.exists():
            path.write_text(secrets.token_urlsafe(24) + "\n")
            path.chmod(0o600)
    return paths


def _spawn(spec: dict[str, object], log: Path | None = None) -> subprocess.Popen[bytes]:
    """`bench/hostile_attack.py` with `spec`, once its interpreter is up; its stderr to
    `log`."""
    with (log or Path("/dev/null")).open("ab") as err:
        proc = subprocess.Popen([sys.executable, "-m", "bench.hostile_attack", json.dumps(spec)],
                                stdout=subprocess.PIPE, stderr=err)  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.readline()  # "ready"
    return proc


def _end(proc: subprocess.Popen[bytes]) -> None:
    """Kill it if it still runs (an attack stops itself), reap it, close its pipe."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def start(ctx: Context, build: Build, seconds: float) -> Site:
    """A daemon of `build` with the tiny model (4 slots), both keys and the stand-in peer,
    whose endless answers last `seconds`."""
    port, peer_port = ctx.port(), ctx.port()
    stand_in = _spawn({"attack": "peer", "peer_port": peer_port, "answer_s": seconds,
                       "seconds": PEER_LIFE_S}, ctx.root / f"stand-in-{peer_port}.log")  # fmt: skip
    files = _keys(ctx)
    keys = {"full": {"key_file": files["full"]},
            "limited": {"key_file": files["limited"], "models": [MODEL]}}  # fmt: skip
    instance = {**instance_keys(ctx, ctx.port()), "n_parallel": 4, "threads": 1}
    peer = {"name": "stand-in", "url": f"http://127.0.0.1:{peer_port}", "token_file": files["full"]}
    daemon = Daemon(ctx, f"hostile-{build.tag or 'new'}", {MODEL: instance}, build=build,
                    gateway={"listen": f"127.0.0.1:{port}", "fleet": True, "keys": keys},
                    tables={"fleet": {"peers": [peer]}})  # fmt: skip
    try:
        daemon.wait_socket()
        daemon.wait_running([MODEL], timeout=60.0)
        wait_for(lambda: (http_get(port) or (0,))[0] == 200, 30.0, f"{build.label} gateway")
    except BaseException:
        daemon.stop()
        _end(stand_in)
        raise
    secret = {n: p.read_text().strip() for n, p in files.items()}
    return Site(build, daemon, port, peer_port, {**secret, "wrong": WRONG_KEY}, stand_in)


def _request(port: int, key: str, kind: str) -> float:
    """Milliseconds for one request on a new connection; OSError or HTTPException if it
    fails (a reset, a timeout, a status other than 200)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    auth = {"Authorization": f"Bearer {key}"}
    start = time.perf_counter()
    try:
        if kind == "health":
            conn.request("GET", "/health", headers=auth)
        else:
            body = json.dumps({"model": MODEL, "prompt": "hi", "max_tokens": 1, "temperature": 0})
            conn.request("POST", "/v1/completions", body,
                         {**auth, "Content-Type": "application/json"})  # fmt: skip
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise http.client.HTTPException(f"{kind}: HTTP {resp.status}")
        return (time.perf_counter() - start) * 1000
    finally:
        conn.close()


def _rss(proc: psutil.Process) -> float:
    return float(proc.memory_info().rss) / 1e6


def _client(site: Site, what: str, attacker: subprocess.Popen[bytes], seen: Seen) -> None:
    """One legitimate client: `what` again and again while the attacker runs (once at
    least); a failed request's time is a sample too."""
    while attacker.poll() is None or not seen.ms[what]:
        start = time.perf_counter()
        try:
            seen.ms[what].append(_request(site.port, site.keys["full"], what))
        except (OSError, http.client.HTTPException):
            seen.errors[what] += 1
            seen.ms[what].append((time.perf_counter() - start) * 1000)


def attack(site: Site, kind: str, key: str | None, seconds: float) -> Seen:
    """Run one attack on `site` for `seconds`, a legitimate client of each kind beside it."""
    spec = {"attack": kind, "port": site.port, "peer_port": site.peer_port, "model": MODEL,
            "key": site.keys[key] if key else None, "seconds": seconds}  # fmt: skip
    proc = psutil.Process(site.daemon.proc.pid)
    seen = Seen(rss_before=_rss(proc))
    seen.rss_max = seen.rss_before
    if kind == "ask_peer":
        wait_for(lambda: _lists(site, PEER_MODEL), 20.0, "the gateway listing the peer's model")
    attacker = _spawn(spec, site.daemon.work / f"attack-{kind}.log")
    try:
        assert attacker.stdout is not None
        time.sleep(min(1.0, seconds / 4))  # the attack takes hold first
        clients = [threading.Thread(target=_client, args=(site, w, attacker, seen), daemon=True)
                   for w in ("completions", "health")]  # fmt: skip
        for c in clients:
            c.start()
        while any(c.is_alive() for c in clients):
            seen.rss_max = max(seen.rss_max, _rss(proc))
            seen.in_flight = max(seen.in_flight or 0, _in_flight(site) or 0)
            for c in clients:
                c.join(0.1)
        seen.stats = json.loads(attacker.stdout.readline() or "{}")
    finally:
        _end(attacker)
    seen.rss_max = max(seen.rss_max, _rss(proc))
    return seen


def _lists(site: Site, model: str) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", site.port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("GET", "/v1/models", headers={"Authorization": f"Bearer {site.keys['full']}"})
        doc = json.loads(conn.getresponse().read())
        return model in {m.get("id") for m in doc.get("data", [])}
    except (OSError, ValueError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def _in_flight(site: Site) -> int | None:
    """The gateway's requests in flight for the model, as its status says."""
    for inst in site.daemon.status().get("instances", []):
        if inst.get("name") == MODEL:
            return int((inst.get("gateway") or {}).get("in_flight", 0))
    return None


def settle(site: Site) -> float:
    """Seconds until the daemon answers /health within 50 ms three times running (at
    most SETTLE_S): an attack's work must not weigh on the next one's figures."""
    start, fast = time.monotonic(), 0
    while fast < 3 and time.monotonic() - start < SETTLE_S:
        try:
            fast = fast + 1 if _request(site.port, site.keys["full"], "health") < P99_MS else 0
        except (OSError, http.client.HTTPException):
            fast = 0
    return time.monotonic() - start


def p99(samples: list[float]) -> float:
    """The 99th percentile (the largest of fewer than 100 samples' neighbours)."""
    if len(samples) < 2:
        return samples[0] if samples else float("nan")
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


def rows(name: str, seen: Seen, quiet: Seen) -> list[Result]:
    """The attack's three rows: each request's p99 against the quiet one's, and RSS."""
    out = []
    for what, path in (("completions", "/v1/completions"), ("health", "/health")):
        figures = {"errors": seen.errors[what], "requests": len(seen.ms[what])}
        out.append(Result(f"hostile {name}: {path} p99", 1, "ms", [p99(seen.ms[what])],
                          [p99(quiet.ms[what])], "overhead", "median", P99_MS,
                          f"p99 < {P99_MS:g} ms, 0 errors", also_ok=seen.errors[what] == 0,
                          note=f"{figures['requests']} requests, {figures['errors']} errors",
                          extra={"figures": figures}))  # fmt: skip
    growth = seen.rss_max - seen.rss_before
    told = ", ".join(f"{k} {v}" for k, v in sorted(seen.stats.items()))
    note = (
        f"RSS {seen.rss_before:.1f} -> {seen.rss_max:.1f} MB; most {MODEL} requests in "
        f"flight: {seen.in_flight}; attacker: {told}"
    )
    extra = {"attacker": seen.stats, "most_in_flight": seen.in_flight}
    out.append(Result(f"hostile {name}: RSS growth", 1, "MB", [growth], [0.0], "overhead",
                      "median", RSS_MB, f"< {RSS_MB:g} MB", note=note, extra=extra))  # fmt: skip
    return out


def measure(ctx: Context, seconds: float, attacks: list[tuple[str, str, str | None]]
            ) -> list[Result]:  # fmt: skip
    """Every attack of `attacks` on each build in turn, `seconds` each, each on a daemon
    of its own (so no attack's memory or work is left to the next); their rows."""
    quiet: dict[str, Seen] = {}
    out: list[Result] = []
    for i, (name, kind, key) in enumerate(attacks):
        for build in baseline.turned(baseline.builds(ctx), i):
            site = start(ctx, build, seconds)
            try:
                if build.label not in quiet:
                    quiet[build.label] = attack(site, "idle", None, seconds / 2)
                settled = settle(site)
                got = rows(name, attack(site, kind, key, seconds), quiet[build.label])
            finally:
                site.stop()
            for r in got:
                r.extra["settle_s"] = round(settled, 2)
            out += [baseline.twin(r, build) for r in got]
    return out


def run(ctx: Context) -> list[Result]:
    """The hostile-neighbour rows: 6 s per attack (3 s with --quick)."""
    return measure(ctx, ctx.reps(6, 3), ATTACKS)
