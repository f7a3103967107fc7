"""The config file's JSON Schema, generated from the pydantic models that check it.

`etc/llamad.schema.json` is this, committed: editors that read JSON Schema for TOML
(Taplo, Even Better TOML) complete and check a `llamad.toml` against it. A test keeps
the committed file equal to what the code generates; `make schema` rewrites it.
`llamactl validate` stays the authority: the schema knows the shape of each table, not
llama-server's options (read from its `--help`) nor the checks across tables.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from llamad.config.schema import ConfigFile

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def config_schema() -> dict[str, Any]:
    """The whole file's schema, with the dialect it is written in."""
    schema = ConfigFile.model_json_schema()
    schema.update(
        {
            "$schema": DIALECT,
            "title": "llamad.toml",
            "description": "llamad's config file (docs/config.md); `llamactl validate` checks "
            "what a schema cannot: llama-server's options and the checks across tables.",
        }
    )
    return schema


def render() -> str:
    """The schema as the committed file holds it: sorted keys, two-space indent."""
    return json.dumps(config_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
