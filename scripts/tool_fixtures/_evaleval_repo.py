"""Shared by the fixture scripts that take files from the public evaleval/every_eval_ever repository."""
from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

REPO_URL = "https://github.com/evaleval/every_eval_ever"


def open_repo(repo: str | Path | None) -> tuple[Path, str]:
    """``(git dir, HEAD commit)`` of a local clone or bare git dir; None clones the public repository."""
    if repo is None:
        repo = Path(tempfile.mkdtemp(prefix="every_eval_ever-")) / "every_eval_ever.git"
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none", REPO_URL, str(repo)], check=True)
    git_dir = Path(repo) / ".git" if (Path(repo) / ".git").is_dir() else Path(repo)
    return git_dir, git(git_dir, "rev-parse", "HEAD").decode().strip()


def git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True).stdout


def write_manifest(out: Path, manifest: dict) -> Path:
    path = out / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path


def repo_arg(ap) -> None:
    ap.add_argument("--repo", help="a local clone (or bare git dir) of evaleval/every_eval_ever (default: clone it)")
