"""The Python peer proxies, each started on 127.0.0.1 in front of the same llama-servers
as llamad (nginx is in bench/peer_nginx.py).

- LiteLLM's proxy and local-engine-router run from their own virtualenv,
  `.venv-bench-peers` (`make bench-peers`), since their pins would change the test
  environment's packages. Every call-out is off: no database, no telemetry, the bundled
  cost map, no Hugging Face hub; nothing here reaches beyond loopback.

A peer that cannot be found or started raises `Unavailable` with the reason, and the
benchmark skips its rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.common import Context
from bench.targets import Target, wait_answering

PEERS_VENV = Path(
    os.environ.get("LLAMAD_BENCH_PEERS_VENV") or Path(__file__).parents[1] / ".venv-bench-peers"
)
# LiteLLM imports for 5 to 10 s on an idle 2-core machine, and for minutes on a busy one.
START_TIMEOUT = 240.0


class Unavailable(Exception):
    """A peer this machine cannot run; the message says why."""


def _peer_bin(name: str) -> Path:
    path = PEERS_VENV / "bin" / name
    if not path.exists():
        raise Unavailable(f"{path} not found: run `make bench-peers` (needs PyPI)")
    return path


def _version(dist: str) -> str:
    python = PEERS_VENV / "bin" / "python"
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def launch(argv: list[str | Path], log: Path, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.Popen[bytes]:  # fmt: skip
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(a) for a in argv], stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, env=env, cwd=cwd,
        )  # fmt: skip


def _answering(target: Target, port: int, path: str) -> Target:
    """`target` once its process answers GET `path` with 200; stopped if it never does."""
    try:
        wait_answering(target.popens[0], port, path, START_TIMEOUT, target.name)
    except BaseException:
        target.stop()
        raise
    return target


def litellm_env(work: Path) -> dict[str, str]:
    """LiteLLM with every lookup and report off, and no auth (as llamad and nginx run)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("LITELLM", "DATABASE"))},
        "HOME": str(work),  # its caches and any dotfiles stay in the run's temp dir
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
        "LITELLM_TELEMETRY": "False",
        "LITELLM_DONT_SHOW_FEEDBACK_BOX": "True",
        "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true",
        "DISABLE_SCHEMA_UPDATE": "true",
        "HF_HUB_OFFLINE": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }


def start_litellm(ctx: Context, upstreams: dict[str, int]) -> Target:
    """LiteLLM's proxy (`litellm --config`), one process, each model as an OpenAI backend."""
    binary = _peer_bin("litellm")
    work, _ = ctx.fresh("litellm")
    port = ctx.port()
    models = "".join(
        f"  - model_name: {model}\n    litellm_params:\n      model: openai/{model}\n"
        f"      api_base: http://127.0.0.1:{up}/v1\n      api_key: none\n"
        for model, up in upstreams.items()
    )
    config = work / "litellm.yaml"
    config.write_text(
        f"model_list:\n{models}litellm_settings:\n  telemetry: false\n"
        "  turn_off_message_logging: true\ngeneral_settings: {}\n"
    )
    argv: list[str | Path] = [
        binary,
        "--config",
        config,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    popen = launch(argv, work / "litellm.log", litellm_env(work), cwd=work)
    base = f"http://127.0.0.1:{port}"
    target = Target("litellm", {m: base for m in upstreams}, {m: [popen.pid] for m in upstreams},
                    popens=[popen], version=_version("litellm"))  # fmt: skip
    return _answering(target, port, "/health/liveliness")


def router_config(
    work: Path, port: int, model: str, upstream: int, start: list[str], env: dict[str, str]
) -> Path:
    """local-engine-router's YAML: one engine at a fixed base URL, exact-name routing.

    No `process_pattern`: the router then knows only the process it launched itself, so
    it never looks processes up by name (other llama-servers run on this machine)."""
    path = work / "config.yaml"
    path.write_text(
        f"host: 127.0.0.1\nport: {port}\nlog_file: {work}/router.log\nlog_level: WARNING\n"
        f"state_file: {work}/state.json\nrouting_mode: manual\nengines:\n  {model}:\n"
        f"    type: generic_process\n    base_url: http://127.0.0.1:{upstream}\n"
        f"    start_cmd: {json.dumps(start)}\n    env: {json.dumps(env)}\n"
        "    ready_path: /health\n"
        f"models:\n  - id: {model}\n    engine: {model}\n    display_name: {model}\n"
    )
    return path


def start_router(
    ctx: Context, model: str, upstream: int, start: list[str], env: dict[str, str] | None = None
) -> Target:
    """One local-engine-router for one llama-server: it keeps one engine active at a time,
    and stopping an engine it did not launch fails, so each llama-server gets its own."""
    binary = _peer_bin("local-engine-router")
    work, _ = ctx.fresh(f"router-{model}")
    port = ctx.port()
    config = router_config(work, port, model, upstream, start, env or {})
    own_env = {**os.environ, "HOME": str(work)}
    popen = launch([binary, "--config", config], work / "out.log", own_env, cwd=work)
    target = Target("local-engine-router", {model: f"http://127.0.0.1:{port}"},
                    {model: [popen.pid]}, popens=[popen])  # fmt: skip
    return _answering(target, port, "/health")


def start_routers(ctx: Context, upstreams: dict[str, int]) -> Target:
    """local-engine-router in front of each llama-server, as one target."""
    merged = Target("local-engine-router", {}, version=_version("local-engine-router"))
    try:
        for model, up in upstreams.items():
            one = start_router(ctx, model, up, [sys.executable, "-c", "raise SystemExit(1)"])
            merged.bases |= one.bases
            merged.pids |= one.pids
            merged.popens += one.popens
    except BaseException:
        merged.stop()
        raise
    return merged
