"""Config validation: every problem is one line naming the file, the key and the value."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from helpers import free_port, write_config

from llamad.client.http import find_socket
from llamad.config.load import check, load
from llamad.config.schema import ConfigError, DaemonSettings, SuperviseSettings

EXAMPLE = Path(__file__).parents[2] / "etc" / "llamad.example.toml"
MINIMAL = EXAMPLE.with_name("llamad.minimal.toml")


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "llamad.toml"
    path.write_text(text)
    return check(path)


def test_example_config_loads(tmp_path: Path, tiny_model: Path) -> None:
    """etc/llamad.example.toml is valid once its model path exists."""
    text = EXAMPLE.read_text().replace(
        "~/models/qwen2.5-0.5b-instruct-q4_k_m.gguf", str(tiny_model)
    )
    path = tmp_path / "llamad.toml"
    path.write_text(text)
    resolved = load(path)
    qwen = resolved.instances["qwen"]
    env = dict(qwen.settings)
    assert env["LLAMA_ARG_N_PARALLEL"] == "2"
    assert env["LLAMA_ARG_N_GPU_LAYERS"] == "all"
    assert env["LLAMA_ARG_CTX_SIZE"] == "4096"
    assert qwen.knobs.start_timeout == 120.0
    # args that set --slot-save-path would turn the prompt cache off (issue #51).
    assert qwen.prompt_cache is not None, qwen.cache_note
    assert qwen.args[:2] == ("--keep", "256")


def test_the_minimal_config_loads_with_every_default_kept(tmp_path: Path, tiny_model: Path) -> None:
    """etc/llamad.minimal.toml is valid once its model exists, and sets only what a first
    config needs: no key that turns a default off."""
    text = MINIMAL.read_text()
    doc = tomllib.loads(text)
    assert doc == {
        "gateway": {"listen": "127.0.0.1:8080"},
        "instances": {"chat": {"model": doc["instances"]["chat"]["model"], "port": 8081,
                               "on_demand": True}},
    }  # fmt: skip
    path = tmp_path / "llamad.toml"
    path.write_text(text.replace(doc["instances"]["chat"]["model"], str(tiny_model)))
    resolved = load(path)
    chat = resolved.instances["chat"]
    assert chat.prompt_cache is not None, chat.cache_note
    assert resolved.gateway is not None
    assert resolved.gateway.keys == ()
    assert resolved.library is not None  # models already on disk are served too


def test_example_lists_every_daemon_and_supervise_key_with_its_default() -> None:
    """The example documents each [daemon] and [supervise] key; set values are the defaults."""
    text = EXAMPLE.read_text()
    doc = tomllib.loads(text)
    for section, model in (("daemon", DaemonSettings), ("supervise", SuperviseSettings)):
        for key, field in model.model_fields.items():
            table = f"[{section}.{key}]"
            assert f"{key} =" in text or table in text, f"{section}.{key} missing from the example"
            if key in doc[section]:
                assert doc[section][key] == field.default, f"{section}.{key}"


def test_valid_config_resolves(tmp_path: Path, tiny_model: Path) -> None:
    """Short keys, env names, no_x inversion, lists and ~ all resolve to llama-server env."""
    cfg = write_config(
        tmp_path / "c.toml",
        {
            "a": {
                "model": tiny_model,
                "port": 9001,
                "ctx_size": 256,
                "no_mmap": True,
                "alias": ["x", "y"],
                "endpoint_metrics": False,
            }
        },
        defaults={"LLAMA_ARG_N_PARALLEL": 2, "flash_attn": True},
    )
    spec = load(cfg).instances["a"]
    env = dict(spec.settings)
    assert env["LLAMA_ARG_MMAP"] == "false"
    assert env["LLAMA_ARG_ALIAS"] == "x,y"
    assert env["LLAMA_ARG_FLASH_ATTN"] == "on"
    assert env["LLAMA_ARG_N_PARALLEL"] == "2"
    assert env["LLAMA_ARG_HOST"] == "127.0.0.1"
    assert "LLAMA_ARG_ENDPOINT_METRICS" not in env
    assert "LLAMA_ARG_NO_MMAP" not in env


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            '[instances.a]\nmodel = "{m}"\nport = 1\nargs = ["--chat-template", """\n'
            '[INST] {{ messages }} [/INST]\n[INST]\n\\"""\n[/INST]\n"""]\nctx_sise = 1\n',
            ["llamad.toml:10: instances.a.ctx_sise: unknown key 'ctx_sise'"],
        ),
        (
            "[instances.a]\nmodel = '{m}'\nport = 1\nargs = ['--chat-template', '''\n"
            '[INST]\n""" [/INST]\n\'\'\', \'x = """\']\nn_gpu_layers = true\n',
            ["llamad.toml:8: instances.a.n_gpu_layers: expects a value like N"],
        ),
        (
            '[instances.qwen]\nmodel = "{m}"\nport = 8089\nctx_sise = 4096\n',
            [
                "llamad.toml:4: instances.qwen.ctx_sise: unknown key 'ctx_sise' "
                "(did you mean ctx_size?)"
            ],
        ),
        (
            '[instances.a]\nmodel = "{m}"\nport = 8089\n'
            '[instances.b]\nmodel = "{m}"\nport = 8089\n',
            [
                "llamad.toml:6: instances.b.port: port 8089 on 127.0.0.1 "
                "is already used by instances.a"
            ],
        ),
        ('[instances.a]\nmodel = "{m}"\nport = 80 89\n', ["llamad.toml:3: invalid TOML:"]),
        (
            '[supervise]\nhealth_interval = -1\n[instances.a]\nmodel = "{m}"\nport = 1\n',
            ["llamad.toml:2: supervise.health_interval: input should be greater than or equal"],
        ),
        (
            '[instances.a]\nmodel = "{m}"\nport = 1\n[instances.a.supervise]\nstop_timeout = 0\n',
            ["llamad.toml:5: instances.a.supervise.stop_timeout: input should be greater than 0"],
        ),
        (
            '[instances.a]\nmodel = "/nope/missing.gguf"\nport = 1\n',
            ["llamad.toml:2: instances.a.model: model file not found: /nope/missing.gguf"],
        ),
        (
            '[instances.a]\nmodel = "{m}"\nport = 1\napi_key_file = "/nope/key"\n',
            ["llamad.toml:4: instances.a.api_key_file: cannot read key file /nope/key"],
        ),
        ('[instances.a]\nmodel = "{m}"\n', ["llamad.toml:1: instances.a.port: is required"]),
        (
            '[daemon]\nsokcet = "/tmp/x"\n',
            ["llamad.toml:2: daemon: unknown key 'sokcet' (did you mean socket?)"],
        ),
        (
            '[instances.a]\nmodel = "{m}"\nport = 1\nargs = ["--slot-save-pth", "/tmp"]\n',
            ["llamad.toml:4: instances.a.args: unknown llama-server flag '--slot-save-pth'"],
        ),
        (
            '[instances.a]\nmodel = "{m}"\nport = 1\nargs = ["--api-key", "k"]\n',
            ["llamad.toml:4: instances.a.args: --api-key would show the key in `ps`"],
        ),
        (
            '[daemon]\nsocket = "/tmp/' + "x" * 120 + '.sock"\n',
            ["llamad.toml:2: daemon.socket: path is longer than 104 bytes"],
        ),
        (
            '[instances.a]\nmodel = "{m}"\nport = 1\nn_gpu_layers = true\n',
            ["llamad.toml:4: instances.a.n_gpu_layers: expects a value like N"],
        ),
        (
            '[[fleet.peers]]\nname = "a"\nurl = "http://a:1"\n\n'
            '[[fleet.peers]]\nname = "b"\nurl = "ftp://b"\n',
            ["llamad.toml:7: fleet.peers[1].url: must start with http:// or https://"],
        ),
        (
            '[[fleet.peers]]\nname = "a"\nurl = "http://a:1"\n[[fleet.peers]]\nnmae = "b"\n',
            [
                "llamad.toml:5: fleet.peers[1].nmae: unknown key 'nmae' (did you mean name?)",
                "llamad.toml:4: fleet.peers[1].name: is required",
            ],
        ),
    ],
    ids=[
        "a key after a multi-line basic string holding table-like lines",
        "a key after a multi-line literal string holding table-like lines",
        "unknown key with suggestion",
        "duplicate port",
        "bad TOML",
        "non-positive interval",
        "non-positive per-instance timeout",
        "missing model",
        "unreadable key file",
        "port required",
        "unknown daemon key",
        "unknown flag in args",
        "secret in args",
        "socket path too long",
        "bool for a valued option",
        "second array-of-tables entry, its key",
        "second array-of-tables entry, an unknown key",
    ],
)
def test_invalid_config_is_one_clear_line(
    tmp_path: Path, tiny_model: Path, body: str, expected: list[str]
) -> None:
    """Each broken config gives the expected `file:line: key: message` lines."""
    found = problems(tmp_path, body.replace("{m}", str(tiny_model)))
    assert len(found) == len(expected), found
    for line, want in zip(found, expected, strict=True):
        assert line.startswith(f"{tmp_path}/{want}"), line


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    """Two bad instances give two lines, not one at a time."""
    found = problems(tmp_path, "[instances.a]\nport = 1\n[instances.b]\nport = 2\n")
    assert [ln.split(": ", 1)[1] for ln in found] == [
        "instances.a: model is required",
        "instances.b: model is required",
    ]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[instances.qwen]\nport = 1\nctx_sise = 1\n", "did you mean ctx_size?"),
        ("[instances.a\n", "invalid TOML"),
    ],
)
def test_llamad_exits_2_without_traceback(tmp_path: Path, text: str, needle: str) -> None:
    """`llamad --config BAD` prints one line per problem and exits 2."""
    path = tmp_path / "bad.toml"
    path.write_text(text)
    run = subprocess.run(
        [sys.executable, "-m", "llamad", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 2
    assert needle in run.stderr
    assert "Traceback" not in run.stderr
    assert all(ln.startswith(f"llamad: {path}") for ln in run.stderr.splitlines())
    last = run.stderr.splitlines()[-1]
    assert last == f"llamad: {path}: check it with: llamactl validate --config {path}"


def test_missing_config_file_exits_2(tmp_path: Path) -> None:
    """A config path that does not exist is a config error, not a silent empty config."""
    run = subprocess.run(
        [sys.executable, "-m", "llamad", "--config", str(tmp_path / "none.toml")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 2
    missing = tmp_path / "none.toml"
    assert run.stderr.splitlines()[0] == f"llamad: {missing}: config file not found"


def test_relative_paths_resolve_against_the_config_files_directory(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config that validates in a shell means the same under launchd (cwd /): model,
    key file, state dir, socket and log dir are taken from the file's directory."""
    conf = tmp_path / "conf"
    (conf / "models").mkdir(parents=True)
    shutil.copy(tiny_model, conf / "models" / "tiny.gguf")
    (conf / "key").write_text("sk-relative\n")
    (conf / "key").chmod(0o600)  # a key file others can read is refused
    cfg = write_config(
        conf / "llamad.toml",
        {"a": {"model": "models/tiny.gguf", "port": 18555, "api_key_file": "key"}},
        daemon={"state_dir": "state", "log_dir": "../logs"},
    )
    monkeypatch.chdir("/")
    resolved = load(cfg)
    spec = resolved.instances["a"]
    assert spec.model == conf / "models" / "tiny.gguf"
    assert dict(spec.settings)["LLAMA_ARG_API_KEY_FILE"] == str(conf / "key")
    assert spec.secrets == ("sk-relative",)
    assert resolved.daemon.state_dir == conf / "state"
    assert resolved.daemon.socket == conf / "state" / "llamad.sock"
    assert resolved.daemon.log_dir == conf / "../logs"


def test_gateway_key_files_and_llamactls_socket_are_the_config_files(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`[gateway] api_key_file`, `[gateway.keys.*] key_file` and the socket llamactl
    finds for a relative `state_dir` are taken from the file's directory, as the daemon's."""
    conf = tmp_path / "conf"
    conf.mkdir()
    for name, secret in (("gw.key", "sk-gateway-default-0001"), ("ci.key", "sk-gateway-ci-0002")):
        (conf / name).write_text(secret + "\n")
        (conf / name).chmod(0o600)
    cfg = write_config(
        conf / "llamad.toml",
        {"a": {"model": tiny_model, "port": free_port()}},
        daemon={"state_dir": "state"},
        gateway={"listen": f"127.0.0.1:{free_port()}", "api_key_file": "gw.key"},
    )
    with cfg.open("a") as out:
        out.write('[gateway.keys.ci]\nkey_file = "ci.key"\n')
    monkeypatch.chdir("/")
    monkeypatch.delenv("LLAMAD_SOCKET", raising=False)
    resolved = load(cfg)
    assert resolved.gateway is not None
    keys = {k.name: k.secret for k in resolved.gateway.keys}
    assert keys == {"default": "sk-gateway-default-0001", "ci": "sk-gateway-ci-0002"}
    assert find_socket(None, str(cfg)) == resolved.daemon.socket == conf / "state" / "llamad.sock"
    cfg.write_text(cfg.read_text().replace('state_dir = "state"', 'socket = "run/d.sock"'))
    assert find_socket(None, str(cfg)) == load(cfg).daemon.socket == conf / "run" / "d.sock"


def test_cache_max_must_be_a_size(tmp_path: Path, tiny_model: Path) -> None:
    """A `cache_max` that is no size is one clear line."""
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"m": {"model": tiny_model, "port": free_port()}},
        daemon={"state_dir": str(tmp_path / "state"), "cache_max": "lots"},
    )
    with pytest.raises(ConfigError) as err:
        load(cfg)
    assert len(err.value.lines) == 1
    assert "daemon.cache_max: must be a size" in err.value.lines[0]
