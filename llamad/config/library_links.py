"""Configured instances whose `model` names a library model instead of a path.

Such an instance gets what the library's own instance of that model would get: its file
and projector, its name as an alias, and from an Ollama store its chat template, system
prompt and stop words. The table's own keys win: a `chat_template` or
`chat_template_file` of its own (as a key in any spelling, or a flag in `args`) keeps the
store's template out, and its `system` and `stop` keys (even empty) replace the store's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from llamad.backends.prompt import PromptDefaults
from llamad.common.paths import anchored
from llamad.config.schema import ConfigFile, InstanceTable
from llamad.library.model import Found, LibraryModel

# The llama-server options that set a chat template, as env names and as flags.
_TEMPLATE_ENVS = frozenset({"LLAMA_ARG_CHAT_TEMPLATE", "LLAMA_ARG_CHAT_TEMPLATE_FILE"})
_TEMPLATE_FLAGS = frozenset({"--chat-template", "--chat-template-file"})
_STORE_TEMPLATE = "chat_template"  # the key a store's translated template comes as


@dataclass(frozen=True)
class Links:
    """The config with its linked instances completed, and what the resolver needs."""

    cfg: ConfigFile
    linked: dict[str, str] = field(default_factory=dict)  # library model -> instance
    prompts: dict[str, PromptDefaults] = field(default_factory=dict)  # instance -> store's


def link_configured(cfg: ConfigFile, found: Found, base: Path) -> Links:
    """Configured instances whose `model` names a library model get its file and
    projector, its name as an alias, and its store's template, system and stop."""
    tables, linked, prompts = dict(cfg.instances), {}, {}
    names = {n for n, t in tables.items() for n in (n, *t.aliases)}
    for name, table in cfg.instances.items():
        extra = dict(table.model_extra or {})
        ref = extra.get("model")
        if not isinstance(ref, str) or anchored(ref, base).exists():
            continue
        model = _lookup(found.models, ref)
        if model is None or model.problem:
            continue
        extra["model"] = str(model.path)
        if model.mmproj and not any("mmproj" in k.lower() for k in extra):
            extra["mmproj"] = str(model.mmproj)
        own_template = _sets_template(table)
        if _STORE_TEMPLATE in model.settings and not own_template:
            extra[_STORE_TEMPLATE] = model.settings[_STORE_TEMPLATE]
        if model.prompt is not None:
            # With its own template, the store's text (for /api/show) is not the one in use.
            store = model.prompt
            prompts[name] = dataclasses.replace(store, template=None) if own_template else store
        aliases = list(table.aliases)
        if model.name not in names:
            aliases.append(model.name)
            names.add(model.name)
        own = table.model_dump(exclude=set(table.model_extra or {}))
        tables[name] = InstanceTable.model_validate({**own, **extra, "aliases": aliases})
        linked[model.name] = name
    return Links(cfg.model_copy(update={"instances": tables}), linked, prompts)


def _sets_template(table: InstanceTable) -> bool:
    """Whether the table gives llama-server a chat template of its own."""
    keys = {k.upper() for k in table.model_extra or {}}
    envs = {k if k.startswith("LLAMA_") else "LLAMA_ARG_" + k for k in keys}
    flags = {a.split("=", 1)[0] for a in table.args}
    return bool(envs & _TEMPLATE_ENVS or flags & _TEMPLATE_FLAGS)


def _lookup(models: list[LibraryModel], ref: str) -> LibraryModel | None:
    bare = ref.removesuffix(":latest")
    return next((m for m in models if ref in (m.name, *m.aliases) or bare == m.name), None)
