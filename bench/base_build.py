"""Which llamad a benchmark's daemon runs: this checkout's, or another commit's for
`python -m bench --baseline REF`.

The other commit's tree is exported with `git archive` and installed (its runtime
dependencies only, in the bench's own versions where its pins allow: the bench names the
llama-server binary in every config) into a virtualenv of its own, built once and kept by
the commit's sha, `.venv-bench-base-<sha12>/`.
Its daemon runs from a directory outside the repository with no PYTHONPATH, so it imports
its own code and never this checkout's; the bench's packages come after its own.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_PREFIX = ".venv-bench-base-"
INSTALLERS = ("pip", "setuptools", "wheel")  # a fresh virtualenv's own: llamad runs without


class BaselineError(Exception):
    """The baseline cannot be built or run; the message is one line."""


@dataclass(frozen=True)
class Build:
    """One llamad: its label in the rows, the Python that runs `-m llamad`, and the commit
    it was installed from; one with a commit runs apart from this checkout."""

    label: str
    python: Path
    commit: str = ""

    @property
    def tag(self) -> str:
        """What follows the `@` in the label ("" for this checkout)."""
        return self.label.partition("@")[2]

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """`env` for this build's daemon: another commit's sees no PYTHONPATH."""
        return {k: v for k, v in env.items() if not (self.commit and k == "PYTHONPATH")}

    def cwd(self, work: Path) -> Path | None:
        """Where its daemon runs: another commit's in `work`, outside the repository (the
        directory `-m` puts first on sys.path); this checkout's where the bench runs."""
        return work if self.commit else None


CURRENT = Build("llamad", Path(sys.executable))


def _run(argv: list[str | Path], cwd: Path | None = None, env: dict[str, str] | None = None,
         ) -> subprocess.CompletedProcess[bytes]:  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, cwd=cwd, env=env, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BaselineError(f"{Path(argv[0]).name}: {exc}") from None
    if done.returncode != 0:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise BaselineError(f"{' '.join(map(str, argv[:4]))} failed: {last}")
    return done


def commit_of(ref: str, repo: Path = REPO) -> str:
    """The full sha `ref` names in `repo`; BaselineError when it names no commit."""
    try:
        done = _run(["git", "-C", repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
    except BaselineError:
        raise BaselineError(f"--baseline {ref}: no such commit in {repo}") from None
    return done.stdout.decode().strip()


def prepare(ref: str, repo: Path = REPO) -> Build:
    """The build of `ref`: its virtualenv made if not cached, checked to import its own
    llamad from there; the packages it has in other versions than the bench are printed."""
    sha = commit_of(ref, repo)
    venv = repo / f"{VENV_PREFIX}{sha[:12]}"
    if not (venv / ".installed").is_file():
        _install(repo, sha, venv)
    # The bench's packages behind its own: a library that imports another when present
    # (httpcore trio, httpx zstandard, structlog colorama: the test extra's) then does so
    # in both daemons, which differ in llamad's code alone.
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (site / "bench-site.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    build = Build(f"llamad@{sha[:7]}", venv / "bin" / "python", sha)
    ours = _versions()
    theirs = _inspect(build, venv)
    unlike = [f"{k} {v} (bench {ours[k]})" for k, v in theirs.items()
              if ours.get(k, v) != v and k not in INSTALLERS]  # fmt: skip
    if unlike:
        print(f"# baseline: packages in other versions than the bench's: {', '.join(unlike)}")
    return build


def _versions() -> dict[str, str]:
    """Every distribution of the bench's environment but llamad, by lower-case name."""
    found = {d.metadata["Name"].lower(): d.version for d in metadata.distributions()}
    found.pop("llamad", None)
    return found


def _install(repo: Path, sha: str, venv: Path) -> None:
    print(f"# baseline: installing {sha[:12]} into {venv.name} (once)", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    archive = _run(["git", "-C", repo, "archive", "--format=tar", sha]).stdout
    with tempfile.TemporaryDirectory(prefix="llamad-base-") as tmp:
        tree, pins = Path(tmp) / "tree", Path(tmp) / "pins.txt"
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        # The bench's own versions where REF's pins allow them: old and new then differ
        # in llamad's code, not in a library's.
        pins.write_text("".join(f"{k}=={v}\n" for k, v in _versions().items()))
        pip: list[str | Path] = [venv / "bin" / "python", "-m", "pip", "install", "--quiet"]
        try:
            _run([sys.executable, "-m", "venv", venv])
            try:
                _run([*pip, "-c", pins, tree], cwd=tree)
            except BaselineError:
                _run([*pip, tree], cwd=tree)  # REF's pins rule out some of them
        except BaselineError:
            shutil.rmtree(venv, ignore_errors=True)
            raise
    (venv / ".installed").write_text(sha + "\n", encoding="utf-8")


def _inspect(build: Build, venv: Path) -> dict[str, str]:
    """Run the build as its daemon runs: where its llamad comes from (BaselineError unless
    its own virtualenv) and the versions it imports (its own before the bench's)."""
    code = (
        "import json, llamad, importlib.metadata as m; print(llamad.__file__); "
        "found = {}; [found.setdefault(d.metadata['Name'].lower(), d.version) "
        "for d in m.distributions()]; print(json.dumps(found))"
    )
    with tempfile.TemporaryDirectory(prefix="llamad-base-") as tmp:
        env = build.env(dict(os.environ))
        done = _run([build.python, "-c", code], cwd=build.cwd(Path(tmp)), env=env)
    where, versions = done.stdout.decode().splitlines()[:2]
    if not Path(where).is_relative_to(venv):
        raise BaselineError(f"{build.label} imports llamad from {where}, not from {venv}")
    found: dict[str, str] = json.loads(versions)
    found.pop("llamad", None)
    return found
