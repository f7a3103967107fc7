"""What the pages say about routes and commands is what the code does (issue #51)."""

from __future__ import annotations

from doc_pages import DOCS, section

from llamad.cli.main import LOCAL_ONLY


def test_the_commands_that_refuse_host_are_named() -> None:
    """`llamactl --host` does not run every command: the ones that refuse it are named
    where `--host` is described."""
    row = next(
        line
        for line in (DOCS / "llamactl.md").read_text().splitlines()
        if "--host NAME COMMAND" in line
    )
    fleet = (DOCS / "fleet.md").read_text()
    for command in LOCAL_ONLY:
        assert f"`{command}`" in row, command
        assert f"`{command}`" in fleet.split("llamactl --host NAME", 1)[1][:400], command


def test_a_key_gets_404_for_a_model_outside_its_list() -> None:
    text = section(DOCS / "config.md", "[gateway.keys.NAME]")
    assert "404" in text
    assert "403" not in text
