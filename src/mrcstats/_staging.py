"""Replace a set of outputs together: build them in a hidden folder, then move them into place.

Used by the report (below) and by ``export`` (:func:`mrcstats.io.eee.write_eee_files`: one folder output whose
existing files are all kept). A report is three outputs beside each other (``NAME.pdf``, ``NAME_tables/``, ``NAME_figures/``) that must
stay consistent: a report killed half-way must leave the previous report whole, never new tables beside
an old PDF. :class:`Staging` gives each output a path inside a hidden staging folder beside them
(``.NAME.pdf.<pid>.<random>.stage/``); nothing outside it changes until :meth:`Staging.commit`.

Commit protocol (every step a rename on one file system, each step safe to repeat):

1. a ``COMMIT`` marker is written (and flushed to disk) into the staging folder: from here on the new
   outputs are complete and the commit rolls *forward*;
2. for each folder output: the entries of the old folder that this writer does not own (files with
   other endings, sub-folders: what a person put there; a sub-folder the new one has too is merged the
   same way) move into the new folder; the old folder moves into the staging folder, the new one into place;
3. each file output replaces the old file (``os.replace``);
4. the staging folder (now holding the old folders) is removed.

A staging folder left by a process that no longer runs is cleaned up by the next :class:`Staging` on the same
outputs: without ``COMMIT`` it is removed (the old outputs were never touched); with ``COMMIT`` the commit
is finished first. So after any kill, the outputs are the old set or the new set, never a mix, from the
next run on; the only window where a reader can see a mix is the few renames of step 2-3.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mrcstats._files import pid_alive
from mrcstats.errors import InputError

_MANIFEST = "manifest.json"
_COMMIT = "COMMIT"
_SUFFIX = ".stage"


class Staging:
    """Stage ``targets`` (``{key: (path, kind, owned endings)}``, kind ``"file"`` or ``"dir"``; ``anchor``
    names the staging folder) and replace them together on :meth:`commit`; an exception before the commit
    removes the staging folder and leaves every target as it was.

    ``owned``: for a folder, the file endings this writer produces; on commit the old folder's files with
    these endings are replaced by the new folder's, and every other entry is kept.
    """

    def __init__(self, anchor: Path, targets: dict[str, tuple[Path, str, tuple[str, ...]]]) -> None:
        self.anchor = Path(anchor)
        self.targets = {k: (Path(p), kind, tuple(owned)) for k, (p, kind, owned) in targets.items()}
        self.dir: Path | None = None
        self.committed = False

    def __enter__(self) -> Staging:  # noqa: PYI034
        parent = self.anchor.parent
        recover_stale(parent, self.anchor.name)
        try:
            parent.mkdir(parents=True, exist_ok=True)
            self.dir = Path(tempfile.mkdtemp(prefix=f".{self.anchor.name}.{os.getpid()}.", suffix=_SUFFIX,
                                             dir=parent))
        except OSError as exc:
            raise InputError(f"cannot write in {parent}: {exc.strerror or exc}") from None
        (self.dir / "new").mkdir()
        (self.dir / "old").mkdir()
        manifest = {k: {"path": str(p.absolute()), "kind": kind, "owned": list(owned)}
                    for k, (p, kind, owned) in self.targets.items()}
        _write_synced(self.dir / _MANIFEST, json.dumps(manifest))
        return self

    def path(self, key: str) -> Path:
        """Where to write ``key`` now (inside the staging folder, named as the target)."""
        assert self.dir is not None, "use Staging as a context manager"
        return self.dir / "new" / self.targets[key][0].name

    def final(self, staged: Path) -> Path:
        """The place a path written inside a staged output will have after the commit."""
        assert self.dir is not None
        rel = Path(staged).relative_to(self.dir / "new")
        for p, _, _ in self.targets.values():
            if rel.parts[0] == p.name:
                return p.joinpath(*rel.parts[1:])
        raise ValueError(f"{staged} is not inside a staged output")

    def commit(self) -> None:
        """Move every staged output into place (see the module docstring)."""
        assert self.dir is not None
        for p, kind, _ in self.targets.values():  # an existing folder is replaced even by an empty build
            if kind == "dir" and p.is_dir():
                (self.dir / "new" / p.name).mkdir(exist_ok=True)
        _write_synced(self.dir / _COMMIT, "")
        self.committed = True
        roll_forward(self.dir)

    def __exit__(self, et, ev, tb) -> None:
        if self.dir is not None and not self.committed:
            shutil.rmtree(self.dir, ignore_errors=True)


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    with contextlib.suppress(OSError):  # the directory entry too (POSIX)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def roll_forward(stage: Path) -> None:
    """Finish the commit of a staging folder that holds ``COMMIT`` (idempotent: safe after a kill at any
    step), then remove the staging folder."""
    manifest: dict[str, Any] = json.loads((stage / _MANIFEST).read_text(encoding="utf-8"))
    for t in manifest.values():
        dest = Path(t["path"])
        new, old = stage / "new" / dest.name, stage / "old" / dest.name
        if not (new.exists() or new.is_symlink()):
            continue  # moved into place already (or nothing to install)
        if t["kind"] == "dir":
            if dest.is_dir() and not dest.is_symlink():
                _keep_others(dest, new, tuple(t["owned"]))
                os.rename(dest, old)
            elif dest.exists() or dest.is_symlink():
                os.replace(dest, old)
            os.rename(new, dest)
        else:
            os.replace(new, dest)
    shutil.rmtree(stage, ignore_errors=True)


def _keep_others(dest: Path, new: Path, owned: tuple[str, ...]) -> None:
    """Move the entries of the old folder ``dest`` that the new one does not replace into ``new``: every entry
    but the files ending in ``owned`` (this writer's own, rebuilt whole); a folder both have is merged the same
    way, so nothing a person (or an earlier run writing other files) put there is lost."""
    for e in list(os.scandir(dest)):
        target = new / e.name
        if e.is_dir(follow_symlinks=False) and target.is_dir() and not target.is_symlink():
            _keep_others(Path(e.path), target, owned)
            continue
        mine = e.is_file(follow_symlinks=False) and e.name.endswith(owned)
        if not mine and not (target.exists() or target.is_symlink()):
            os.rename(e.path, target)   # keep what a person put there


def recover_stale(parent: Path, name: str) -> int:
    """Clean up the staging folders for ``name`` in ``parent`` left by processes that no longer run: finish
    a commit that had begun (``COMMIT`` present), remove the others. Returns how many were found."""
    prefix = f".{name}."
    n = 0
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return 0
    for e in entries:
        if not (e.name.startswith(prefix) and e.name.endswith(_SUFFIX) and e.is_dir(follow_symlinks=False)):
            continue
        pid = e.name[len(prefix):].split(".", 1)[0]
        if not pid.isdigit() or pid_alive(int(pid)):
            continue
        stage = Path(e.path)
        n += 1
        if (stage / _COMMIT).exists() and (stage / _MANIFEST).exists():
            try:
                roll_forward(stage)
            except OSError as exc:
                raise InputError(f"{stage}: an interrupted write could not be finished ({exc.strerror or exc}); "
                                 f"move its 'new' outputs into place by hand or remove the folder") from None
        else:
            shutil.rmtree(stage, ignore_errors=True)
    return n
