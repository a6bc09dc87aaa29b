"""Stanza constituency parses (the seed's parser: tokenize, pos, constituency).

Stanza is an optional extra (``pip install 'mrcstats[stanza]'``, CPU torch). Its English
models live in a resources directory: ``models_dir`` if given, else
``$MRCSTATS_STANZA_DIR``, ``$STANZA_RESOURCES_DIR``, ``~/stanza_resources``.
``mrcstats models download [--dir DIR]`` fills it through :func:`download_models`
(a wrapper of ``stanza.download``). :func:`models_present` checks the directory on
disk only, so ``--parser auto`` decides without importing stanza or torch.

Sentences come from Stanza's own tokenizer; each line of the text is a paragraph
(joined with blank lines), so a newline between pieces is always a sentence boundary.
Trees are ``(ROOT ...)`` with preterminals already, normalised all the same.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

from mrcstats.errors import DependencyError
from mrcstats.features.parsers import ParsedText, parsed_from_trees
from mrcstats.features.tokens import clean_text
from mrcstats.features.trees import Tree, normalize, parse_brackets

__all__ = ["PROCESSORS", "StanzaParser", "download_models", "models_present", "resources_dir"]

PROCESSORS = ("tokenize", "pos", "constituency")
LANG = "en"
_PIP_HINT = "pip install 'mrcstats[stanza]'"


def resources_dir(models_dir: str | os.PathLike | None = None) -> Path:
    """Where Stanza models are looked for and downloaded to."""
    for cand in (models_dir, os.environ.get("MRCSTATS_STANZA_DIR"), os.environ.get("STANZA_RESOURCES_DIR")):
        if cand:
            return Path(cand).expanduser()
    return Path.home() / "stanza_resources"


def _download_command(d: Path) -> str:
    return f"mrcstats models download --dir {d}"


def models_present(models_dir: str | os.PathLike | None = None) -> bool:
    """True when ``resources.json`` and a model file for each processor exist (no imports)."""
    d = resources_dir(models_dir)
    if not (d / "resources.json").is_file():
        return False
    return all(any((d / LANG / proc).glob("*.pt")) for proc in PROCESSORS)


def _stanza_version() -> str | None:
    try:
        return importlib.metadata.version("stanza")
    except importlib.metadata.PackageNotFoundError:
        return None


def _import_stanza():
    try:
        import stanza
    except ImportError as exc:
        raise DependencyError(f"the stanza parser needs the stanza extra ({exc}): {_PIP_HINT}") from None
    return stanza


def download_models(models_dir: str | os.PathLike | None = None) -> Path:
    """Download the English tokenize/pos/constituency models into ``models_dir``; return it."""
    d = resources_dir(models_dir)
    stanza = _import_stanza()
    d.mkdir(parents=True, exist_ok=True)
    try:
        stanza.download(LANG, model_dir=str(d), processors=",".join(PROCESSORS), logging_level="WARN")
    except Exception as exc:  # noqa: BLE001
        raise DependencyError(f"stanza.download into {d} failed ({type(exc).__name__}: {exc}); "
                              "check the network access to Stanza's model hub and retry") from None
    if not models_present(d):
        raise DependencyError(f"stanza.download finished but the models are not in {d}; "
                              f"retry `{_download_command(d)}`")
    return d


class StanzaParser:
    """Constituency trees from a Stanza pipeline (CPU by default)."""

    name = "stanza"

    def __init__(self, *, models_dir: str | None = None, use_gpu: bool = False) -> None:
        d = resources_dir(models_dir)
        if not models_present(d):
            raise DependencyError(f"Stanza's English models are missing in {d}: run `{_download_command(d)}`")
        if _stanza_version() is None:
            raise DependencyError(f"the stanza parser needs the stanza extra: {_PIP_HINT}")
        self.models_dir = d
        self.use_gpu = use_gpu
        self._nlp = None  # loaded on the first parse (imports torch), not to compute the version
        self._version = f"stanza {_stanza_version()}; models {self._models_signature()}"

    def _pipeline(self):
        if self._nlp is None:
            stanza = _import_stanza()
            d = self.models_dir
            try:
                self._nlp = stanza.Pipeline(lang=LANG, dir=str(d), processors=",".join(PROCESSORS),
                                            download_method=None, use_gpu=self.use_gpu, logging_level="WARN")
            except Exception as exc:  # noqa: BLE001
                raise DependencyError(f"cannot load Stanza's models from {d} ({type(exc).__name__}: {exc}); "
                                      f"run `{_download_command(d)}`") from None
        return self._nlp

    def _models_signature(self) -> str:
        try:
            res = json.loads((self.models_dir / "resources.json").read_text(encoding="utf-8"))
            v = res.get("version") or "?"
        except (OSError, ValueError):
            v = "?"
        files = sorted(p.relative_to(self.models_dir / LANG).as_posix()
                       for proc in PROCESSORS for p in (self.models_dir / LANG / proc).glob("*.pt"))
        return f"{v} {' '.join(files)}"

    @property
    def version(self) -> str:
        return self._version

    def parse_text(self, text: str) -> ParsedText:
        lines = [line for line in clean_text(text).split("\n") if line]
        if not lines:
            return ParsedText(0, 0, 0)
        doc = self._pipeline()("\n\n".join(lines))
        trees: list[Tree] = []
        for sent in doc.sentences:
            for t in parse_brackets(str(sent.constituency)):
                norm = normalize(t)
                if norm is not None:
                    trees.append(norm)
        return parsed_from_trees(trees)
