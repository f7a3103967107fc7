"""The reason shown for an exit is the line that says why, not llama-server's last words."""

from __future__ import annotations

from llamad.supervise.process import ExitInfo


def test_first_error_line_is_the_reason() -> None:
    """llama-server's real output for an unreadable model: the cause is mid-tail."""
    tail = [
        "main: loading model",
        "gguf_init_from_file: failed to open GGUF file '/m/x.gguf' (Permission denied)",
        "llama_model_load: error loading model: llama_model_loader: failed to load model",
        "common_init_from_params: failed to load model '/m/x.gguf'",
        "srv    load_model: failed to load model, '/m/x.gguf'",
        "srv    operator(): operator(): cleaning up before exit...",
        "main: exiting due to model loading error",
    ]
    reason = ExitInfo(1, None, "now", tail).describe()
    assert reason.startswith("exited with code 1: gguf_init_from_file: failed to open"), reason


def test_plain_last_line_when_nothing_telling() -> None:
    """Without an error line, the last non-blank line stays the reason."""
    assert ExitInfo(3, None, "now", ["a", "bye", ""]).describe() == "exited with code 3: bye"
