"""`llamactl export kubernetes`: the Service and EndpointSlice by which pods reach a
llamad outside the cluster, checked against the official schemas (`export litellm` is
tested beside the gateway, in tests/gateway/test_export_litellm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kube_manifests import supported_versions, validate

from llamad.cli.export import yaml_text
from llamad.cli.main import run

KEY = "k" * 32


def _key(path: Path) -> Path:
    path.write_text(KEY + "\n")
    path.chmod(0o600)
    return path


def _config(tmp_path: Path, gateway: str, remote: str | None = None) -> Path:
    lines = [
        "[daemon]",
        f'state_dir = "{tmp_path / "state"}"',
        "[gateway]",
        f'listen = "{gateway}"',
        f'api_key_file = "{_key(tmp_path / "gateway-key")}"',
    ]
    if remote:
        token = _key(tmp_path / "token")
        lines += ["[daemon.remote]", f'listen = "{remote}"', f'token_file = "{token}"']
    path = tmp_path / "llamad.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _export(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_kubernetes_from_the_config_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A selectorless Service and the EndpointSlice naming this machine's gateway and
    control ports, as the config has them: valid for three Kubernetes versions."""
    config = _config(tmp_path, "192.168.7.2:8080", remote="0.0.0.0:7777")
    code, out, err = _export(capsys, "--config", str(config), "export", "kubernetes",
                             "--name", "llamad-mac")  # fmt: skip
    assert (code, err) == (0, "")
    service, addressed = list(yaml.safe_load_all(out))
    assert validate([service, addressed], supported_versions()) == []
    assert "selector" not in service["spec"]
    assert service["metadata"] == {
        "name": "llamad-mac",
        "namespace": "llm",
        "labels": {"app.kubernetes.io/name": "llamad", "app.kubernetes.io/managed-by": "llamactl"},
    }
    assert addressed["metadata"]["labels"]["kubernetes.io/service-name"] == "llamad-mac"
    assert addressed["addressType"] == "IPv4"
    assert addressed["endpoints"] == [{"addresses": ["192.168.7.2"], "conditions": {"ready": True}}]
    ports = [(p["name"], p["port"]) for p in addressed["ports"]]
    assert ports == [("http", 8080), ("control", 7777)]
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == ports


def test_kubernetes_from_flags_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Flags need no config; an IPv6 address makes an IPv6 slice; no control port."""
    code, out, _ = _export(capsys, "--config", str(tmp_path / "none.toml"), "export",
                           "kubernetes", "--address", "fd00::7", "--port", "18080",
                           "--control-port", "0", "--namespace", "ai")  # fmt: skip
    assert code == 0
    service, addressed = list(yaml.safe_load_all(out))
    assert validate([service, addressed], supported_versions()) == []
    assert addressed["addressType"] == "IPv6"
    assert [p["name"] for p in addressed["ports"]] == ["http"]
    assert service["metadata"]["namespace"] == "ai"
    assert service["metadata"]["name"].startswith("llamad-")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "127.0.0.1 is not an address the cluster can reach: give --address IP"),
        (("--address", "mac.lan"), "'mac.lan' is not an IP address"),
        (("--address", "10.0.0.2", "--name", "Mac_Studio"), "--name: 'Mac_Studio' is not a"),
        (("--address", "10.0.0.2", "--port", "70000"), "port http: 70000 is not a TCP port"),
    ],
)
def test_kubernetes_refuses_what_the_cluster_cannot_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    """One line naming the flag and the value, exit 2: nothing half-written."""
    config = _config(tmp_path, "127.0.0.1:8080")
    code, out, err = _export(capsys, "--config", str(config), "export", "kubernetes", *argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1, err
    assert message in err


def test_kubernetes_names_a_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "llamad.toml"
    config.write_text("[gateway]\nlisten = 8080\n")
    code, _, err = _export(capsys, "--config", str(config), "export", "kubernetes")
    assert code == 2
    assert err.startswith(f"llamactl: {config}:2: gateway.listen")


@pytest.mark.parametrize(
    "value", ["a: b", "- c\n- d", "x\ny: z", "true", "null", "'q'", '"q"', "#x", "{}", "é ✓"]
)
def test_no_value_changes_the_documents_shape(value: str) -> None:
    """Whatever a name holds, the YAML reads back as the structure that was written."""
    doc = {"model_list": [{"model_name": value, "litellm_params": {"model": value, "n": 1}}]}
    assert yaml.safe_load(yaml_text(doc)) == doc


def test_litellm_without_a_daemon(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The model list comes from the running daemon: none is exit 7, one line."""
    code, out, err = _export(capsys, "--socket", str(tmp_path / "none.sock"), "export", "litellm")
    assert (code, out) == (7, "")
    assert err.count("\n") == 1, err
