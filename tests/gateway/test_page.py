"""The page at /ui in a real headless Chromium (Debian's chromium and chromium-driver),
against a real llamad with the tiny models."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from cache_helpers import restart_between_turns
from demo_helpers import BASE, demo
from fleet_helpers import a_routing_to_b
from gateway_helpers import TINY, chat, fake_gateway, gateway
from helpers import stand_in_binary, wait_for

from llamad.daemon.tinymodel import write_tiny_model

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
pytestmark = [
    pytest.mark.skipif(
        not (CHROMIUM and DRIVER),
        reason="no headless browser: apt-get install chromium chromium-driver",
    ),
    pytest.mark.timeout(120),
]
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.common.by import By  # noqa: E402

# Where to keep the screenshot for the docs (`make screenshots`); else the test's tmp_path.
SHOTS = os.environ.get("LLAMAD_SCREENSHOTS")


@contextmanager
def browser() -> Iterator[Any]:
    """Headless Chromium driven by chromedriver, both Debian's: nothing is downloaded."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1300", "--no-first-run"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=webdriver.ChromeService(str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


# The page redraws its tables as events arrive: read and click in one script each, so no
# element goes stale between finding it and using it.
def _rows(driver: Any, table: str) -> list[list[str]]:
    script = (
        "return [...document.querySelectorAll(arguments[0])]"
        ".map(tr => [...tr.children].map(td => td.textContent))"
    )
    return list(driver.execute_script(script, f"#{table} tbody tr"))


def _state(driver: Any, model: str) -> str:
    script = "const c = document.querySelector(arguments[0]); return c ? c.textContent : ''"
    return str(driver.execute_script(script, f'#models tr[data-model="{model}"] td.state'))


def _legend(driver: Any, chart: str) -> str:
    script = "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent).join(' ')"
    return str(driver.execute_script(script, f"#{chart} .u-legend .u-series"))


def _click(driver: Any, selector: str) -> None:
    driver.execute_script("document.querySelector(arguments[0]).click()", selector)


def _ctl_state(gw: Any, model: str) -> str:
    out = gw.ld.ctl("status", "--json", model)
    return str(__import__("json").loads(out.stdout)["instances"][0]["state"])


@pytest.mark.timeout(180)  # three loads, a restart and a 256-token chat, on a loaded machine
def test_the_page_lists_models_shows_activity_acts_and_chats(
    tiny_model: Path, tmp_path: Path
) -> None:
    lazy = {**TINY, "on_demand": True}
    models = {"tiny": TINY, "tiny-embed": TINY, "tiny-lazy": lazy}
    with gateway(tiny_model, models) as gw, browser() as driver:
        # A browser asking for / is sent to the page; Ollama's probe still gets its text.
        assert httpx.get(gw.base + "/", timeout=5).text == "Ollama is running"
        driver.get(gw.base + "/")
        wait_for(lambda: len(_rows(driver, "models")) == 3, 10, "three models listed")
        assert driver.current_url.endswith("/ui")
        wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#live.on"), 5, "events live")

        client = openai.OpenAI(base_url=f"{gw.base}/v1", api_key="none")
        client.chat.completions.create(**chat("tiny", 4))
        wait_for(lambda: _rows(driver, "activity"), 1.0, "the request in the activity")
        cells = _rows(driver, "activity")[0]
        assert cells[1] == "tiny"
        assert cells[3] == "200"
        assert cells[9].endswith("/ 4")
        cached, evaluated = (int(n) for n in cells[10].split(" / "))  # of the prompt
        assert cached + evaluated == int(cells[9].split(" / ")[0])
        for chart in ("speed", "ttft"):  # drawn by the vendored uPlot, a series per model
            wait_for(lambda c=chart: "tiny" in _legend(driver, c), 5, f"tiny in the {chart} chart")

        # Each model's footprint beside its estimate; the budget as a bar, a part per model.
        tiny = next(r for r in _rows(driver, "models") if r[0] == "tiny")
        assert "(est. " in tiny[4]
        parts = "return [...document.querySelectorAll('#memory span')].map(s => s.title)"
        assert len(driver.execute_script(parts)) == 2
        assert "budget" in driver.find_element(By.ID, "memory-text").text

        _click(driver, '#models tr[data-model="tiny-lazy"] [data-verb="load"]')
        wait_for(lambda: _ctl_state(gw, "tiny-lazy") == "running", 15, "loaded by the button")
        wait_for(lambda: _state(driver, "tiny-lazy") == "running", 5, "the page shows it")
        _click(driver, '#models tr[data-model="tiny-lazy"] [data-verb="unload"]')
        wait_for(lambda: _ctl_state(gw, "tiny-lazy") == "idle", 15, "unloaded by the button")
        stops = lambda: driver.find_element(By.ID, "stops").text  # noqa: E731
        wait_for(lambda: "tiny-lazy" in stops(), 5, "the stop among the recent ones")
        assert "unloaded on request" in stops()
        _click(driver, '#models tr[data-model="tiny-embed"] [data-verb="restart"]')
        wait_for(lambda: gw.starts("tiny-embed") == 2, 15, "restarted by the button")
        wait_for(lambda: _ctl_state(gw, "tiny-embed") == "running", 15, "running again")

        driver.execute_script("document.querySelector('#play-model').value = 'tiny-lazy'")
        driver.find_element(By.ID, "play-send").click()
        wait_for(lambda: driver.find_element(By.ID, "play-out").text, 20, "a streamed answer")
        # The row comes when the answer ends: up to 256 tokens, slow on a loaded machine.
        wait_for(lambda: driver.find_element(By.ID, "play-send").is_enabled(), 60, "its end")
        wait_for(lambda: len(_rows(driver, "activity")) >= 2, 5, "the chat in the activity")
        wait_for(lambda: _state(driver, "tiny-lazy") == "running", 5, "loaded by the chat")
        driver.find_element(By.ID, "log-show").click()
        wait_for(lambda: driver.find_element(By.ID, "log").text, 5, "the log tail")
        wait_for(lambda: _rows(driver, "keys")[0][1] == "2", 5, "usage counts both requests")
        _screenshot(driver, tmp_path / "page.png")


def test_a_load_shows_on_the_page_as_it_goes(tiny_model: Path, llama_server: Path) -> None:
    slow = {**TINY, "on_demand": True, "env": {"FAKE_LOAD_SECONDS": "3"}}
    with fake_gateway(tiny_model, llama_server, {"slow": slow}) as gw, browser() as driver:
        driver.get(gw.base + "/ui")
        wait_for(lambda: _state(driver, "slow") == "stopped", 10, "the model listed")
        _click(driver, '#models tr[data-model="slow"] [data-verb="load"]')
        # A first load has no estimate yet: how long it has been going.
        wait_for(lambda: _state(driver, "slow").startswith("loading "), 5, "the load shown")
        wait_for(lambda: _state(driver, "slow") == "running", 20, "then running")


def test_with_a_key_nothing_loads_until_it_is_entered(tiny_model: Path, tmp_path: Path) -> None:
    key_file = tmp_path / "gateway.key"
    key_file.write_text("page-secret-0123456789\n")
    key_file.chmod(0o600)
    with gateway(tiny_model, {"tiny": TINY}, api_key_file=str(key_file)) as gw, browser() as driver:
        driver.get(gw.base + "/ui")
        wait_for(lambda: driver.find_element(By.ID, "login").is_displayed(), 10, "the key form")
        assert not driver.find_element(By.ID, "main").is_displayed()
        assert not _rows(driver, "models")
        # Actions need the key too.
        action = httpx.post(f"{gw.base}/ui/api/models/tiny/unload", timeout=5)
        assert action.status_code == 401
        driver.find_element(By.ID, "key").send_keys("wrong")
        driver.find_element(By.CSS_SELECTOR, "#login button").click()
        wait_for(lambda: driver.find_element(By.ID, "login-error").text, 5, "a refusal")
        box = driver.find_element(By.ID, "key")
        box.clear()
        box.send_keys("page-secret-0123456789")
        driver.find_element(By.CSS_SELECTOR, "#login button").click()
        wait_for(lambda: len(_rows(driver, "models")) == 1, 10, "the model, with the key")
        assert _ctl_state(gw, "tiny") == "running"


# Before the page's own script: `/v1/events` can be cut (the open stream aborted, the next
# fetches refused) and let through again, as a dropped reader or a network blip would.
_CUTTABLE_EVENTS = """
const realFetch = window.fetch;
let cut = false, open = null;
window.cutEvents = () => { cut = true; if (open) open.abort(); };
window.healEvents = () => { cut = false; };
window.fetch = (path, opts) => {
  if (!String(path).includes("/v1/events")) return realFetch(path, opts);
  if (cut) return Promise.reject(new TypeError("cut by the test"));
  open = new AbortController();
  return realFetch(path, Object.assign({}, opts, { signal: open.signal }));
};
"""


def test_requests_served_while_the_event_stream_was_down_show_once_it_is_back(
    tiny_model: Path,
) -> None:
    with gateway(tiny_model, {"tiny": TINY}) as gw, browser() as driver:
        driver.execute_cdp_cmd(
            "Page.addScriptToEvaluateOnNewDocument", {"source": _CUTTABLE_EVENTS}
        )
        driver.get(gw.base + "/ui")
        live = lambda: driver.find_elements(By.CSS_SELECTOR, "#live.on")  # noqa: E731
        wait_for(live, 10, "events live")
        client = openai.OpenAI(base_url=f"{gw.base}/v1", api_key="none")
        client.chat.completions.create(**chat("tiny", 2))
        wait_for(lambda: len(_rows(driver, "activity")) == 1, 5, "the first request")
        driver.execute_script("window.cutEvents()")
        wait_for(lambda: not live(), 5, "the stream down")
        client.chat.completions.create(**chat("tiny", 3))
        driver.execute_script("window.healEvents()")
        wait_for(live, 10, "the stream back")
        wait_for(lambda: len(_rows(driver, "activity")) == 2, 5, "the request missed meanwhile")
        client.chat.completions.create(**chat("tiny", 4))
        wait_for(lambda: len(_rows(driver, "activity")) == 3, 5, "and the next, once each")
        completions = [r[9].rsplit(" / ", 1)[1] for r in _rows(driver, "activity")]
        assert completions == ["4", "3", "2"]


def _screenshot(driver: Any, path: Path) -> None:
    driver.save_screenshot(str(path))
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(SHOTS) / "page.png")
    assert subprocess.run(["file", str(path)], capture_output=True, text=True).stdout


def test_the_fleet_section_shows_each_peers_models_and_when_one_is_away(
    tiny_model: Path,
) -> None:
    with a_routing_to_b(tiny_model) as (a, b), browser() as driver:
        driver.get(a.gateway + "/ui")

        def peer_models() -> set[tuple[str, str, str]]:
            return {(r[0].split()[0], r[1], r[2]) for r in _rows(driver, "fleet")}

        wanted = {("b", "bonly", "running"), ("b", "both", "running")}
        wait_for(lambda: peer_models() >= wanted, 20, "B's models in A's fleet section")
        assert driver.find_element(By.ID, "fleet-section").is_displayed()
        # The fleet's models are routable through A: the models table lists B's own too.
        wait_for(lambda: "bonly @b" in {r[0] for r in _rows(driver, "models")}, 5, "bonly @b")
        b.ld.stop()
        wait_for(lambda: _rows(driver, "fleet")[0][2].startswith("away"), 20, "B away")


def test_a_model_without_a_template_says_so_under_its_name(
    tiny_model: Path, tmp_path: Path
) -> None:
    """A GGUF with no chat template (and no built-in one for its architecture) has a
    line under its name; one that carries its own has none."""
    bare = write_tiny_model(tmp_path / "bare.gguf", chat_template=None)
    models = {"tiny": TINY, "bare": {**TINY, "model": bare, "on_demand": True}}
    with gateway(tiny_model, models) as gw, browser() as driver:
        assert _lines_under_names(driver, gw.base, "template") == {
            "tiny": None,
            "bare": "template: none: the model carries no chat template (llama); ChatML is used",
        }


def test_a_model_whose_cache_is_not_kept_says_why_under_its_name(
    tiny_model: Path, tmp_path: Path
) -> None:
    """The prompt cache's note (here: `args` name their own save directory) is a line
    under the model's name; a model whose cache is kept has none."""
    own = {**TINY, "on_demand": True, "args": ["--slot-save-path", str(tmp_path)]}
    with gateway(tiny_model, {"tiny": TINY, "own": own}) as gw, browser() as driver:
        assert _lines_under_names(driver, gw.base, "cache") == {
            "tiny": None,
            "own": "prompt cache off: args set --slot-save-path: llamad leaves those files alone",
        }


def test_a_models_restores_show_under_its_name(tiny_model: Path) -> None:
    """After a restart restored its slot and the next turn reused it, the line under
    the model's name says so: restores, reused, tokens saved, restore time, bytes on
    disk. A model that never saved a slot has no such line."""
    one = {"ctx_size": 1024, "n_parallel": 1}
    idle = {**TINY, "on_demand": True}
    with gateway(tiny_model, {"tiny": one, "idle": idle}) as gw, browser() as driver:
        cached = restart_between_turns(gw, "tiny")["cache_n"]
        p50, p95 = (gw.ld.instance("tiny")["prompt_cache"]["restores"][k]
                    for k in ("restore_ms_p50", "restore_ms_p95"))  # fmt: skip
        lines = _lines_under_names(driver, gw.base, "restores")
    assert lines["idle"] is None
    line = lines["tiny"]
    assert line is not None
    want = f"prompt cache: 1 restores, 1 reused, {cached} tokens saved, restore {p50:g}/{p95:g} ms"
    assert line.startswith(want), line
    assert line.endswith(" on disk"), line


def _lines_under_names(driver: Any, base: str, kind: str) -> dict[str, str | None]:
    """Each model's line of class `kind` under its name on the page (None: no line)."""
    driver.get(base + "/ui")
    wait_for(lambda: len(_rows(driver, "models")) == 2, 10, "both models listed")
    script = (
        "return [...document.querySelectorAll('#models tr')]"
        f".map(tr => [tr.dataset.model, tr.querySelector('td .{kind}')?.textContent])"
    )
    return dict(driver.execute_script(script)[1:])


def test_without_fleet_there_is_no_fleet_section(tiny_model: Path) -> None:
    with gateway(tiny_model, {"tiny": TINY}) as gw:
        assert "fleet" not in httpx.get(f"{gw.base}/ui/api/status", timeout=5).json()


def test_actions_are_posts_and_need_a_key_beyond_loopback(tiny_model: Path) -> None:
    """Keyless, the page acts only for a gateway on loopback: this one listens on every
    address (allowed in the config), so its page may look but not stop models."""
    keyless = {"host": "0.0.0.0", "allow_keyless_remote": True}
    with gateway(tiny_model, {"tiny": TINY}, **keyless) as gw:
        url = f"{gw.base}/ui/api/models/tiny/unload"
        assert httpx.get(url, timeout=5).status_code == 405  # never a GET
        refused = httpx.post(url, timeout=5)
        assert refused.status_code == 403
        assert "need a gateway key" in refused.json()["error"]["message"]
        assert httpx.get(f"{gw.base}/ui/api/status", timeout=5).json()["models"]
        assert gw.state("tiny") == "running"


def test_the_log_tail_is_redacted_as_llamactl_logs_is(
    tiny_model: Path, llama_server: Path, tmp_path: Path
) -> None:
    """An instance that prints its own key: the page's log tail shows it redacted."""
    secret = "sk-page-tail-5c2e81f0"
    binary = tmp_path / "llama-server"
    serve = f'echo "key=$LLAMA_API_KEY"\nexec "{llama_server}" "$@"'
    stand_in_binary(binary, llama_server, serve=serve)
    keyed = {**TINY, "api_key": secret}
    with gateway(tiny_model, {"keyed": keyed}, daemon={"llama_server": str(binary)}) as gw:
        url = f"{gw.base}/ui/api/models/keyed/logs"
        lines = wait_for(lambda: httpx.get(url, timeout=5).json()["lines"], 5, "the log tail")
        assert "key=[redacted]" in lines
        assert secret not in "\n".join(lines)
        assert lines == gw.ld.ctl("logs", "keyed").stdout.splitlines()[-len(lines) :]


def test_done_when_a_person_opens_the_demos_page(tmp_path: Path) -> None:
    """The issue's "done when", on `llamad --demo` itself: the tiny models and the real
    one (the test extra installs it), tiny-lazy loaded with a click, a chat with it, and
    the request with its tokens per second."""
    with demo(tmp_path / "demo.stderr"), browser() as driver:
        driver.get(BASE + "/ui")
        wait_for(lambda: len(_rows(driver, "models")) == 4, 10, "the demo's four models")
        # First: the playground's default; its GGUF carries no template, and says so.
        assert _rows(driver, "models")[0][0] == (
            "gemmatemplate: built-in gemma (the model carries none)"
        )
        assert _state(driver, "tiny-lazy") == "stopped"
        _click(driver, '#models tr[data-model="tiny-lazy"] [data-verb="load"]')
        wait_for(lambda: _state(driver, "tiny-lazy") == "running", 20, "tiny-lazy loaded")
        driver.execute_script("document.querySelector('#play-model').value = 'tiny-lazy'")
        driver.find_element(By.ID, "play-send").click()
        wait_for(lambda: driver.find_element(By.ID, "play-out").text, 20, "the chat's answer")

        def speed() -> str | None:
            rows = [r for r in _rows(driver, "activity") if r[1] == "tiny-lazy"]
            return rows[0][11] if rows and rows[0][11] != "-" else None

        # The row comes when the answer ends: up to 256 tokens, slow on a loaded machine.
        wait_for(lambda: driver.find_element(By.ID, "play-send").is_enabled(), 60, "its end")
        assert float(wait_for(speed, 5, "the chat in the activity, with its tok/s")) > 0
