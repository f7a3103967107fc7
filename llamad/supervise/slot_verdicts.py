"""Whether restoring a model's saved slots pays, judged by the request after each restore.

llama-server's restore answers 200 with the tokens it restored whether or not the next
request can reuse them: a hybrid or recurrent model (Qwen3.5, LFM2, Granite 4 hybrids,
Mamba, RWKV...) keeps its recurrent state in the file but not the context checkpoints a
prefix is reused from, so the next request is evaluated from its first token (llama.cpp
#25913). The honest measure is that request's own `timings`: the tokens taken from the
cache (`cache_n`) against those evaluated (`prompt_n`).

The first request an instance serves after a restore judges it: a miss when it evaluated
at least as many tokens as the restore put back and took fewer than half of them from the
cache, a hit when it took at least half; a shorter prompt (another conversation) says
nothing. Misses in a row (`MISSES`, one for an architecture known to be hybrid or
recurrent) stop the cache for that model file and llama-server build: no more saves, and
its files go. A new build, or another model file, tries again. The stops outlive the
process in `verdicts.json` at the cache's root.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger("llamad.cache")

MISSES = 2
FILE = "verdicts.json"
# Restore times kept per model for the percentiles.
_TIMES = 128


@dataclass
class Judged:
    """What the restores of one model file and build have shown."""

    restores: int = 0  # restores made
    hits: int = 0
    misses: int = 0
    in_a_row: int = 0  # misses since the last hit
    tokens_saved: int = 0  # taken from a restored cache instead of evaluated
    stopped: str | None = None  # why the cache is off for it
    times_ms: deque[float] = field(default_factory=lambda: deque(maxlen=_TIMES))
    ms_total: float = 0.0  # every restore's time, for the metrics' sum

    def to_dict(self) -> dict[str, Any]:
        """Its figures, as the status document and `llamactl cache` show them."""
        times = sorted(self.times_ms)
        p95 = times[min(len(times) - 1, int(len(times) * 0.95))] if times else None
        return {
            "restores": self.restores,
            "hits": self.hits,
            "misses": self.misses,
            "tokens_saved": self.tokens_saved,
            "restore_ms_p50": round(statistics.median(times), 1) if times else None,
            "restore_ms_p95": None if p95 is None else round(p95, 1),
            "restore_ms_total": round(self.ms_total, 1),
            "stopped": self.stopped,
        }


def fit_key(fit: dict[str, Any]) -> str:
    """The model file and llama-server build a saved slot fits (`cache_fit`)."""
    model = fit.get("model") or {}
    parts = (model.get("path"), model.get("size"), model.get("mtime_ns"), fit.get("build"))
    return json.dumps(parts)


class Verdicts:
    """The restores' verdicts, per model file and build (`fit_key`), for every instance."""

    def __init__(self) -> None:
        self._judged: dict[str, Judged] = {}
        self._of: dict[str, str] = {}  # instance -> the key its process fits
        self._waiting: dict[str, int] = {}  # instance -> tokens restored, not yet judged
        self._recurrent: dict[str, str] = {}  # instance -> its hybrid architecture
        self._loaded: set[Path] = set()

    def fits(self, instance: str, fit: dict[str, Any], root: Path, recurrent: str | None) -> None:
        """`instance`'s new process fits `fit` (its cache under `root`); `recurrent`
        names its architecture when that is hybrid or recurrent."""
        self._load(root)
        self._of[instance] = fit_key(fit)
        self._waiting.pop(instance, None)
        if recurrent is None:
            self._recurrent.pop(instance, None)
        else:
            self._recurrent[instance] = recurrent

    def stopped(self, instance: str) -> str | None:
        """Why `instance`'s cache is stopped, or None when it is not."""
        key = self._of.get(instance)
        judged = self._judged.get(key) if key is not None else None
        return judged.stopped if judged is not None else None

    def restored(self, instance: str, tokens: int, ms: float) -> None:
        """A restore put `tokens` back into `instance`'s process in `ms`."""
        judged = self._for(instance)
        if judged is None or tokens <= 0:
            return
        judged.restores += 1
        judged.times_ms.append(ms)
        judged.ms_total += ms
        # The next request continues one of the conversations put back: the shortest
        # is the least it will reuse if restores pay.
        waiting = self._waiting.get(instance)
        self._waiting[instance] = tokens if waiting is None else min(waiting, tokens)

    def served(self, instance: str, cached: int | None, evaluated: int | None, root: Path) -> bool:
        """`instance` answered a request that took `cached` tokens from its cache and
        evaluated `evaluated`; True when this stopped its cache (its files are to go)."""
        restored = self._waiting.get(instance)
        judged = self._for(instance)
        if restored is None or judged is None or cached is None or evaluated is None:
            return False
        if cached * 2 >= restored:
            del self._waiting[instance]
            judged.hits += 1
            judged.in_a_row = 0
            judged.tokens_saved += cached
            return False
        if cached + evaluated < restored:
            return False  # a shorter prompt: another conversation, which says nothing
        del self._waiting[instance]
        judged.misses += 1
        judged.in_a_row += 1
        arch = self._recurrent.get(instance)
        if judged.stopped is not None or judged.in_a_row < (1 if arch else MISSES):
            return False
        why = f"{judged.in_a_row} restore(s) in a row reused nothing"
        if arch is not None:
            why += f" (expected: {arch} is a hybrid or recurrent architecture)"
        judged.stopped = why
        self._save(root)
        log.warning("cache.stopped", instance=instance, reason=why, restored=restored,
                    evaluated=evaluated, cached=cached)  # fmt: skip
        return True

    def of(self, instance: str) -> dict[str, Any] | None:
        """The figures of the model `instance` runs, or None before its first fit."""
        judged = self._for(instance)
        if judged is None:
            return None
        out = judged.to_dict()
        out["recurrent"] = self._recurrent.get(instance)
        return out

    def _for(self, instance: str) -> Judged | None:
        key = self._of.get(instance)
        if key is None:
            return None
        judged = self._judged.get(key)
        if judged is None:
            judged = self._judged[key] = Judged()
        return judged

    def _load(self, root: Path) -> None:
        if root in self._loaded:
            return
        self._loaded.add(root)
        try:
            body = json.loads((root / FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(body, dict):
            for key, why in body.items():
                if isinstance(why, str):
                    judged = self._judged.setdefault(key, Judged())
                    judged.stopped = why

    def _save(self, root: Path) -> None:
        body = {k: j.stopped for k, j in self._judged.items() if j.stopped is not None}
        tmp = root / (FILE + ".tmp")
        with contextlib.suppress(OSError):
            root.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(body, indent=1), encoding="utf-8")
            os.replace(tmp, root / FILE)
