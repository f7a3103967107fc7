"""Instances' own `/metrics`, passed through with only a `name` label added.

prometheus_client's parser renames a counter's samples to `<family>_total`, which would
turn llama-server's `llamacpp:n_tokens_max` (a counter without the suffix) into another
series. So the parser only validates an instance's text; the lines pass through as they
are, each sample gaining the label, families grouped across instances under one HELP and
TYPE as the text format requires.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

LABEL = "name"
_PARTS = ("", "_bucket", "_sum", "_count", "_total", "_created")
_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?(\s+\S.*)")


@dataclass
class _Family:
    head: dict[str, str] = field(default_factory=dict)  # "HELP"/"TYPE" -> its line
    samples: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(f"{line}\n" for line in [*self.head.values(), *self.samples])


def relabel(texts: dict[str, str]) -> str:
    """Every instance's metrics text (by instance name), each sample labelled with it."""
    families: dict[str, _Family] = {}
    for name, text in texts.items():
        if not _valid(text):
            continue  # a garbled scrape of one instance must not spoil the rest
        label = f'{LABEL}="{_escape(name)}"'
        current = "\0"  # no family yet: matches no sample's name
        for line in text.splitlines():
            if line.startswith("#"):
                parts = line.split(maxsplit=3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    current = parts[2]
                    families.setdefault(current, _Family()).head.setdefault(parts[1], line)
                continue
            if (m := _SAMPLE.fullmatch(line)) is None:
                continue
            metric, labels, rest = m.groups()
            # A histogram's `_bucket`/`_sum`/`_count` belong to the family above them.
            key = current if metric.removeprefix(current) in _PARTS else metric
            inner = f"{labels},{label}" if labels else label
            families.setdefault(key, _Family()).samples.append(f"{metric}{{{inner}}}{rest}")
    return "".join(fam.text() for fam in families.values())


def _valid(text: str) -> bool:
    try:
        for _ in text_string_to_metric_families(text):
            pass
    except ValueError:
        return False
    return True


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
