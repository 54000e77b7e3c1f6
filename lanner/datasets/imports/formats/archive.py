"""Unpack an uploaded .zip or .tar(.gz/.bz2/.xz) without trusting it.

Archives come from anyone with an upload link, so every member is checked before anything is written (names,
types, declared sizes, compression ratios) and again while its bytes are streamed to disk, because headers can lie.
Refusals raise ``ImportRefused`` naming the member; ``dest`` may then hold a partial tree the caller removes.

A zip's members can be written by several processes at once (``unpacker``, the import's worker pool): this
process checks every member and makes every folder, then hands out the files, which ``write_zip_members``
streams with the same per-member checks and messages.
"""

from __future__ import annotations

import lzma
import os
import re
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO

from lanner.datasets.imports.formats.common import is_junk, split_of
from lanner.datasets.records import ImportLimits, ImportRefused

# A member this small cannot be a bomb whatever its ratio (a plain-colour BMP compresses 1000:1); the overall
# ratio and the size limits still apply to it.
RATIO_FLOOR = 1024 * 1024

CHUNK = 1 << 20
_DRIVE = re.compile(r"^[A-Za-z]:")
_KEEP_TOP = {"images", "labels"}  # a lone top folder with these names is part of the layout, not a wrapper
_READ_ERRORS = (zipfile.BadZipFile, tarfile.TarError, zlib.error, lzma.LZMAError, EOFError, NotImplementedError,
                RuntimeError)


@dataclass(frozen=True)
class ZipMember:
    """A checked zip member for another process to write: which entry, where, and what its header declares."""

    index: int                              # its place in the archive's ``infolist()``
    name: str
    target: Path
    size: int
    compressed: int


Unpacker = Callable[[Path, list["ZipMember"], ImportLimits], None]


def extract_archive(archive: Path, dest: Path, limits: ImportLimits, *, unpacker: Unpacker | None = None) -> Path:
    """Safely unpack ``archive`` into ``dest`` member by member; return the folder holding the dataset.
    ``unpacker`` writes a zip's files elsewhere (on several cores); a tar is a stream, unpacked here."""
    with archive.open("rb") as handle:
        magic = handle.read(4)
    dest.mkdir(parents=True, exist_ok=True)
    budget = _Budget(limits, archive.stat().st_size)
    try:
        if magic[:2] == b"PK":
            _extract_zip(archive, dest, budget, unpacker)
        elif tarfile.is_tarfile(archive):
            _extract_tar(archive, dest, budget)
        else:
            raise ImportRefused(f"{archive.name} is not a zip or tar archive.")
    except _READ_ERRORS as error:
        raise ImportRefused(f"{archive.name} is damaged or unsupported: {error}") from error
    return top_folder(dest)


def top_folder(dest: Path) -> Path:
    """If everything sits in one wrapper folder, that folder; a lone split/images folder is kept as layout."""
    entries = [p for p in dest.iterdir() if not is_junk((p.name,))]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        name = entries[0].name
        if split_of(name) is None and name.lower() not in _KEEP_TOP:
            return entries[0]
    return dest


class _Budget:
    """Running totals against the limits, for declared sizes up front and for bytes actually written."""

    def __init__(self, limits: ImportLimits, archive_bytes: int) -> None:
        self.limits = limits
        self.archive_bytes = max(archive_bytes, 1)
        self.files = 0
        self.declared = 0
        self.written = 0

    def count(self, name: str) -> None:
        """Every member counts against ``max_files``, folders included (each one costs a mkdir)."""
        self.files += 1
        if self.files > self.limits.max_files:
            raise ImportRefused(f"The archive has more than {self.limits.max_files} files (limit reached at {name}).")

    def declare(self, name: str, size: int, compressed: int | None) -> None:
        """Check one file's header; ``compressed`` is None for tar, whose members carry no compressed size."""
        limits = self.limits
        if size > limits.max_file_bytes:
            raise ImportRefused(f"{name} unpacks to {size} bytes, over the {limits.max_file_bytes}-byte limit "
                                "per file.")
        self.declared += size
        if self.declared > limits.max_total_bytes:
            raise ImportRefused(f"The archive unpacks to more than {limits.max_total_bytes} bytes "
                                f"(limit passed at {name}).")
        if compressed is not None and size > RATIO_FLOOR and (compressed <= 0 or size / compressed > limits.max_ratio):
            raise ImportRefused(f"{name} is compressed more than {limits.max_ratio:g}:1, which looks like a zip bomb.")
        if self.declared / self.archive_bytes > limits.max_ratio:
            raise ImportRefused(f"The archive unpacks to more than {limits.max_ratio:g} times its size "
                                f"(passed at {name}), which looks like a zip bomb.")

    def stream(self, name: str, source: IO[bytes], target: Path, declared: int, compressed: int | None) -> None:
        """Copy one member, counting real bytes: a header that under-states its size is caught here."""
        limits = self.limits
        count = 0
        try:
            # Private to this process (0600): the blob store may link these very files (``put_path(link=True)``).
            with open(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), "wb") as out:
                while chunk := source.read(CHUNK):
                    count += len(chunk)
                    self.written += len(chunk)
                    if count > declared:
                        raise ImportRefused(f"{name} holds more bytes than its header declares.")
                    if count > limits.max_file_bytes or self.written > limits.max_total_bytes:
                        raise ImportRefused(f"{name} unpacks past the archive size limits.")
                    if compressed is not None and count > max(RATIO_FLOOR, limits.max_ratio * max(compressed, 1)):
                        raise ImportRefused(f"{name} is compressed more than {limits.max_ratio:g}:1.")
                    if self.written > limits.max_ratio * self.archive_bytes:
                        raise ImportRefused(f"The archive unpacks to more than {limits.max_ratio:g} times its size "
                                            f"(passed at {name}).")
                    out.write(chunk)
        except _READ_ERRORS as error:
            raise ImportRefused(f"Archive member {name} is damaged or unsupported: {error}") from error
        except OSError as error:
            raise ImportRefused(f"{name} could not be written: {error.strerror or error}.") from error


def _member_path(name: str) -> tuple[str, ...]:
    """The member's path parts, refusing absolute paths and ``..`` (zip-slip); backslashes count as separators."""
    text = name.replace("\\", "/")
    if "\x00" in text:
        raise ImportRefused(f"Archive member {name!r} has a NUL byte in its name.")
    if text.startswith("/") or _DRIVE.match(text):
        raise ImportRefused(f"Archive member {name} has an absolute path.")
    parts = tuple(p for p in text.split("/") if p not in ("", "."))  # PurePosixPath(text).parts, ~20x faster
    if ".." in parts:
        raise ImportRefused(f"Archive member {name} points outside the archive ('..' in its path).")
    return parts


def _mkdir(path: Path, name: str) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ImportRefused(f"{name} could not be created: {error.strerror or error}.") from error


@dataclass(frozen=True)
class _Member:
    """One archive entry as both formats describe it: enough to check it and to write it."""

    name: str
    is_dir: bool
    size: int                               # declared, uncompressed
    compressed: int | None                  # None for tar, whose members carry no compressed size
    open: Callable[[], IO[bytes] | None]
    index: int = -1                         # a zip member's place in its ``infolist()``


def _checked(budget: _Budget, member: _Member, problem: str | None) -> _Member:
    """Check one member before anything is written; ``problem`` is what its format found wrong with it."""
    parts = _member_path(member.name)
    if problem:
        raise ImportRefused(problem)
    budget.count(member.name)
    if not member.is_dir and parts:
        budget.declare(member.name, member.size, member.compressed)
    return member


def _targets(dest: Path, members: list[_Member]) -> Iterator[tuple[_Member, Path]]:
    """Each file member with its target, making folders as they come; junk and the archive's root entry are
    skipped. Each folder is checked and made once (resolving every member's whole path cost more than writing a
    small image); a file is then opened without following a link, so its own name cannot lead elsewhere either."""
    root = dest.resolve()
    folders: set[Path] = set()
    for member in members:
        parts = _member_path(member.name)
        if not parts or is_junk(parts):
            continue
        target = dest.joinpath(*parts)
        folder = target if member.is_dir else target.parent
        if folder not in folders:
            if not folder.resolve().is_relative_to(root):  # belt and braces after the name checks
                raise ImportRefused(f"Archive member {member.name} points outside the archive.")
            _mkdir(folder, member.name)
            folders.add(folder)
        if not member.is_dir:
            yield member, target


def _write(dest: Path, budget: _Budget, members: list[_Member]) -> None:
    """Write the checked members in order, counting real bytes."""
    for member, target in _targets(dest, members):
        source = member.open()
        if source is None:
            raise ImportRefused(f"Archive member {member.name} could not be read.")
        with source:
            budget.stream(member.name, source, target, member.size, member.compressed)


def _zip_problem(info: zipfile.ZipInfo) -> str | None:
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind == stat.S_IFLNK:
        return f"Archive member {info.filename} is a symbolic link."
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        return f"Archive member {info.filename} is a device or special file."
    if info.flag_bits & 0x1:
        return f"Archive member {info.filename} is encrypted."
    return None


def _tar_problem(member: tarfile.TarInfo) -> str | None:
    if member.issym() or member.islnk():
        return f"Archive member {member.name} is a link."
    if not (member.isfile() or member.isdir()):
        return f"Archive member {member.name} is a device or special file."
    return None


def _extract_zip(archive: Path, dest: Path, budget: _Budget, unpacker: Unpacker | None) -> None:
    with zipfile.ZipFile(archive) as zf:
        members = [_checked(budget, _Member(info.filename, info.is_dir(), info.file_size, info.compress_size,
                                            partial(zf.open, info), index), _zip_problem(info))
                   for index, info in enumerate(zf.infolist())]  # all checked before the first byte is written
        files = list(_targets(dest, members)) if unpacker is not None else []
        if unpacker is None or len({target for _, target in files}) < len(files):
            _write(dest, budget, members)  # one file written twice: the last one wins, in order, here
            return
    unpacker(archive, [ZipMember(m.index, m.name, target, m.size, m.compressed or 0) for m, target in files],
             budget.limits)


def write_zip_members(archive: Path, zf: zipfile.ZipFile, members: list[ZipMember], limits: ImportLimits) -> None:
    """Write checked members of ``archive`` (open as ``zf``, in a pool worker) with the same checks and messages as
    ``_write``: a header that under-states a size, a bomb or a damaged member is refused naming it."""
    budget = _Budget(limits, archive.stat().st_size)  # per member, as counted here; the totals were declared
    infos = zf.infolist()
    try:
        for member in members:
            info = infos[member.index]
            if info.filename != member.name:
                raise ImportRefused(f"{archive.name} changed while it was unpacked.")
            with zf.open(info) as source:
                budget.stream(member.name, source, member.target, member.size, member.compressed)
    except _READ_ERRORS as error:
        raise ImportRefused(f"{archive.name} is damaged or unsupported: {error}") from error


def _extract_tar(archive: Path, dest: Path, budget: _Budget) -> None:
    with tarfile.open(archive, "r:*") as tf:
        # Iterating reads headers only; running totals refuse a bomb before its data is inflated.
        members = [_checked(budget, _Member(member.name, member.isdir(), member.size, None,
                                            partial(tf.extractfile, member)), _tar_problem(member))
                   for member in tf]
        _write(dest, budget, members)
