"""gateway.upstreams: an instance's Upstream is made once per spec and process (no server)."""

from __future__ import annotations

import dataclasses

from supervisor_double import spec

from llamad.backends.prompt import PromptDefaults
from llamad.gateway.relay.upstreams import Upstreams
from llamad.lifecycle.states import State
from llamad.supervise.facts import Facts

PIDS: dict[str, int] = {}  # the process each instance has now


def facts(name: str = "a", pid: int | None = 100, **changes: object) -> Facts:
    return Facts(dataclasses.replace(spec(name), **changes), State.RUNNING, pid, None, (), False)


def test_the_same_spec_and_process_give_the_same_upstream() -> None:
    ups, first = Upstreams(PIDS.get), facts()
    up = ups.of(first)
    assert (up.name, up.base_url, up.pid, up.host) == ("a", "http://127.0.0.1:9", 100, None)
    again = dataclasses.replace(first, state=State.RUNNING)  # a fresh snapshot, same spec
    assert ups.of(again) is up


def test_a_restart_or_a_reload_gives_a_new_one() -> None:
    ups, first = Upstreams(PIDS.get), facts()
    up = ups.of(first)
    restarted = ups.of(dataclasses.replace(first, pid=101))
    assert (restarted.pid, restarted.base_url) == (101, up.base_url)
    reloaded = ups.of(facts(port=10, pid=101))  # another spec object: another port
    assert (reloaded.base_url, reloaded.pid) == ("http://127.0.0.1:10", 101)


def test_an_upstream_knows_when_its_process_was_replaced() -> None:
    ups = Upstreams(PIDS.get)
    PIDS["a"] = 100
    up = ups.of(facts(pid=100))
    assert not up.replaced()
    PIDS["a"] = 101  # it crashed, and the supervisor started another
    assert up.replaced()
    assert not ups.of(facts(pid=101)).replaced()
    del PIDS["a"]  # stopped
    assert up.replaced()


def test_the_answer_name_and_file_come_from_the_spec() -> None:
    settings = (("LLAMA_ARG_ALIAS", "served-name"),)
    up = Upstreams(PIDS.get).of(facts(settings=settings))
    assert up.answer_name == "served-name"
    assert up.model_path is None


def test_request_defaults_ride_only_on_models_that_have_them() -> None:
    assert Upstreams(PIDS.get).of(facts()).prompt is None  # its bodies go through unparsed
    shown_only = PromptDefaults(template="{{ .Prompt }}")  # nothing to add to a request
    assert Upstreams(PIDS.get).of(facts(prompt=shown_only)).prompt is None
    stops = PromptDefaults(stop=("\n",))
    assert Upstreams(PIDS.get).of(facts(prompt=stops)).prompt == stops
