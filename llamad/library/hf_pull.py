"""Pulling a GGUF from Hugging Face with `huggingface_hub`: into its standard cache,
resumable, honouring HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE; each file checked against
the sha256 the hub gives, and the space it needs checked before it starts."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, cast

from llamad.library.digest import file_sha256
from llamad.library.names import is_projector_name, quant_of, split_part
from llamad.library.progress import FileProgress, PullError, Report, bar_class, status
from llamad.library.refs import DEFAULT_QUANT, HfRef
from llamad.library.space import check_space, disk_full, is_full


def pull_hf(ref: HfRef, report: Report) -> list[str]:
    """Download the files of `ref` (model parts and a projector); returns those that were
    not in the cache before, as the repo names them: llamad's own, which `rm` may delete."""
    from huggingface_hub import HfApi, constants, try_to_load_from_cache
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled, RepositoryNotFoundError

    status(report, "pulling manifest")
    try:
        info = HfApi().model_info(ref.repo, files_metadata=True)
    except RepositoryNotFoundError:
        raise PullError(
            f"{ref.repo}: no such repository on Hugging Face (or it is private: set HF_TOKEN)"
        ) from None
    except OfflineModeIsEnabled:
        raise PullError(f"{ref.repo}: HF_HUB_OFFLINE is set; nothing can be pulled") from None
    except (HfHubHTTPError, OSError) as exc:
        raise PullError(f"{ref.repo}: {_first_line(exc)}") from None
    siblings = [s for s in info.siblings or [] if s.rfilename.lower().endswith(".gguf")]
    files = _pick(ref, siblings)
    cache = Path(constants.HF_HUB_CACHE)
    check_space(cache, sum(_size(s) for s in files))
    fresh = []
    for sib in files:
        had = try_to_load_from_cache(ref.repo, sib.rfilename, revision=info.sha)
        _download(cache, ref.repo, info.sha or "main", sib, report)
        if not isinstance(had, str):  # a person's own download stays theirs
            fresh.append(sib.rfilename)
    return fresh


def _pick(ref: HfRef, siblings: list[Any]) -> list[Any]:
    models = [s for s in siblings if not is_projector_name(Path(s.rfilename).name)]
    projectors = [s for s in siblings if is_projector_name(Path(s.rfilename).name)]
    if ref.file is not None:
        chosen = [s for s in siblings if s.rfilename == ref.file]
        if not chosen:
            raise PullError(
                f"{ref.repo}: no file {ref.file}; it has: {_names(siblings, lambda s: s.rfilename)}"
            )
    else:
        want = (ref.quant or DEFAULT_QUANT).lower()
        chosen = [s for s in models if (quant_of(_stem(s.rfilename)) or "").lower() == want]
        if not chosen and ref.quant is None and len(models) == 1:
            chosen = models
        if not chosen:
            have = _names(models, lambda s: quant_of(_stem(s.rfilename)) or s.rfilename)
            raise PullError(
                f"{ref.repo}: no GGUF with quantisation {want.upper()}; "
                f"it has: {have or 'no GGUF files'}"
            )
    first = split_part(_stem(chosen[0].rfilename))
    if first is not None:  # every part of a split model
        chosen = [s for s in models if (p := split_part(_stem(s.rfilename))) and p[0] == first[0]]
    if projectors:  # vision: the projector comes first, so the model is complete when it lands
        f16 = [s for s in projectors if "f16" in s.rfilename.lower()]
        chosen = [(f16 or projectors)[0], *chosen]
    return chosen


def _download(cache: Path, repo: str, revision: str, sib: Any, report: Report) -> Path:
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError

    sha = sib.lfs.sha256 if sib.lfs else None
    size = _size(sib)
    digest = f"sha256:{sha}" if sha else f"git:{sib.blob_id}"
    progress = FileProgress(report, digest, size)
    try:
        # huggingface_hub holds a download to the size its own HEAD gives, and only once
        # all of it is written: that size must be the one the space was checked for, and
        # the progress bar (told of each chunk before it is written) stops it past that.
        said = get_hf_file_metadata(hf_hub_url(repo, sib.rfilename, revision=revision)).size
        if said != size:
            raise PullError(
                f"{repo}/{sib.rfilename}: the hub gives its size as {said} bytes here and "
                f"{size} in the repo's listing; nothing was downloaded"
            )
        path = Path(
            hf_hub_download(
                repo, sib.rfilename, revision=revision, tqdm_class=cast(Any, bar_class(progress))
            )
        )
    except (HfHubHTTPError, OSError, ValueError) as exc:
        # huggingface_hub deletes its own temporary file when a download fails.
        if is_full(exc):
            raise disk_full(f"{repo}/{sib.rfilename}", cache) from None
        raise PullError(f"{repo}/{sib.rfilename}: {_first_line(exc)}") from None
    progress.set(size, force=True)
    if sha is not None:
        status(report, "verifying sha256 digest")
        got = file_sha256(path)
        if got != sha:
            _remove(path)
            raise PullError(
                f"{repo}/{sib.rfilename}: sha256 mismatch (got {got}, the hub says {sha}); removed"
            )
    return path


def _size(sib: Any) -> int:
    """The size the repo's listing declares for a file: what a download is held to."""
    size = sib.lfs.size if sib.lfs else sib.size
    if not isinstance(size, int) or size < 0:
        raise PullError(f"the hub's listing gives {sib.rfilename} no size; it is not pulled")
    return size


def _remove(link: Path) -> None:
    """A refused file goes: the snapshot's link and the blob it points at."""
    blob = Path(os.path.realpath(link))
    for path in (link, blob):
        with contextlib.suppress(OSError):
            path.unlink()


def _names(items: list[Any], key: Any) -> str:
    return ", ".join(sorted({str(key(s)) for s in items}))


def _stem(filename: str) -> str:
    name = Path(filename).name
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
