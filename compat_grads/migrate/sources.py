"""Which files to scan and how to read and write them: size cap, encodings, notebooks, symlink
loops, atomic writes. Every problem becomes a `ScanError` for that one file, never a crash."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import io
import json
import os
import re
import stat
import tempfile
import tokenize
from collections.abc import Iterator

MAX_BYTES = 5 * 1024 * 1024
SUFFIXES = (".py", ".ipynb")
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})
# IPython magics, shell escapes and help requests are not Python; they become `pass` (same
# line numbers): `%magic`, `!cmd`, `?name`, `name?` / `name??`.
_MAGIC = re.compile(r"^([ \t]*)(?:[%!?].*|[A-Za-z_*][\w*]*(?:\.[\w*]+)*\?\??[ \t]*)$",
                    re.MULTILINE)
# `files = !ls`, `out = %sx ls`: the name stays bound (to None), so look-alike checks see it.
_ASSIGNED_MAGIC = re.compile(
    r"^([ \t]*)([A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*)[ \t]*=[ \t]*[!%].*$",
    re.MULTILINE)
# Cell magics whose body is Python run by IPython: only their first line is not Python.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})
# Line magics that run the Python statement after them (and their options).
_PYTHON_LINE_MAGIC = re.compile(
    r"^([ \t]*)(%(?:time|timeit|prun)(?:[ \t]+-\w+(?:[ \t]+[\w.]+)?)*[ \t]+)(\S.*)$",
    re.MULTILINE)


class ScanError(Exception):
    """A file that could not be read, parsed or written; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class Unit:
    """One piece of Python: a module, or one code cell (`cell`, 1-based) of a notebook."""

    cell: int | None
    source: str
    tree: ast.Module


@dataclasses.dataclass(frozen=True)
class SourceFile:
    """A read file: its bytes (to detect concurrent changes), encoding and parsed units."""

    path: str
    raw: bytes
    encoding: str
    units: list[Unit]

    @property
    def notebook(self) -> bool:
        """Whether the file is a notebook (scanned, never rewritten)."""
        return self.path.endswith(".ipynb")


def walk(paths: list[str]) -> Iterator[str]:
    """The files to scan: explicit files, and `.py` / `.ipynb` files under directories
    (hidden and cache directories skipped, directory symlinks not followed: no loops)."""
    seen = set()
    for path in paths:
        for found in _walk_one(path):
            real = os.path.realpath(found)
            if real not in seen:
                seen.add(real)
                yield found


def _walk_one(path: str) -> Iterator[str]:
    if not os.path.isdir(path):
        yield path
        return
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        yield from (os.path.join(root, f) for f in sorted(files) if f.endswith(SUFFIXES))


def load(path: str, max_bytes: int = MAX_BYTES) -> SourceFile:
    """Reads and parses `path`.

    Raises:
      ScanError: when it cannot be read, is too large, binary, not decodable or not valid
        Python (or a malformed notebook).
    """
    raw = _read(path, max_bytes)
    if b"\0" in raw:
        raise ScanError("binary file (it contains NUL bytes) (fix: scan only Python sources)")
    if path.endswith(".ipynb"):
        return SourceFile(path, raw, "utf-8", _notebook_units(path, raw))
    encoding, text = _decode(raw)
    return SourceFile(path, raw, encoding, [Unit(None, text, parse(text, path))])


def _read(path: str, max_bytes: float) -> bytes:
    try:
        size = os.stat(path).st_size
        if size > max_bytes:
            raise ScanError(f"file is {size} bytes, over the {max_bytes}-byte limit; skipped "
                            "(fix: raise it with --max-size, or exclude the file)")
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as err:
        raise ScanError(f"cannot read: {err.strerror or err} (fix: check the path and its "
                        "permissions)") from err


def _decode(raw: bytes) -> tuple[str, str]:
    """Decodes as Python does: a BOM or a coding cookie, else UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return encoding, raw.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as err:
        raise ScanError(f"not valid UTF-8 and no usable coding declaration ({err}) (fix: "
                        "re-encode it as UTF-8, or add a '# -*- coding: latin-1 -*-' line)"
                        ) from err


def parse(text: str, path: str, where: str = "", cell: bool = False) -> ast.Module:
    """Parses `text` (a notebook cell when `cell`); raises ScanError with the line and a fix
    for invalid Python."""
    try:
        return ast.parse(text, filename=path)
    except SyntaxError as err:
        fix = ("make the cell valid Python 3 for this interpreter (IPython magics, `!` shell "
               "escapes and `name?` help lines are skipped), or exclude the notebook" if cell
               else "make it valid Python 3 for this interpreter, e.g. port Python 2 code, "
               "or exclude the file")
        raise ScanError(f"cannot parse{where}: line {err.lineno}: {err.msg} (fix: {fix})"
                        ) from err
    except (ValueError, RecursionError, MemoryError) as err:
        raise ScanError(f"cannot parse{where}: {type(err).__name__}: {err} (fix: exclude the "
                        "file)") from err


def _notebook_units(path: str, raw: bytes) -> list[Unit]:
    try:
        cells = json.loads(raw.decode("utf-8"))["cells"]
        sources = [(n, c.get("source", "")) for n, c in enumerate(cells, 1)
                   if c.get("cell_type") == "code"]
        texts = [(n, s if isinstance(s, str) else "".join(s)) for n, s in sources]
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ScanError(f"malformed notebook: {type(err).__name__}: {err} (fix: open and "
                        "save it in Jupyter, or exclude it)") from err
    units = []
    for number, text in texts:
        python = _cell_python(text)
        units.append(Unit(number, python, parse(python, path, f" cell {number}", cell=True)))
    return units


def _cell_python(text: str) -> str:
    """The Python of one code cell, line numbers kept: magics and shell escapes become
    `pass`, except the statement a `%time` / `%timeit` / `%prun` line runs; a cell magic that
    runs Python (`%%time`) loses its first line only, any other (`%%bash`, `%%writefile`)
    the whole cell."""
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        magic = re.match(r"%%(\w*)", lines[first].lstrip()).group(1)
        if magic not in _PYTHON_CELL_MAGICS:
            return ""
        lines[first] = ""
        text = "\n".join(lines)
    text = _PYTHON_LINE_MAGIC.sub(_timed_statement, text)
    text = _ASSIGNED_MAGIC.sub(lambda m: f"{m.group(1)}{m.group(2)} = None", text)
    return _MAGIC.sub(lambda m: m.group(1) + "pass", text)


def _timed_statement(match: re.Match) -> str:
    """`%time J = f(x)` as `pass; J = f(x)`, columns kept, so the statement is scanned; a
    statement that cannot follow `;` (a compound one) stays a magic."""
    indent, magic, statement = match.groups()
    python = "pass;".ljust(len(magic)) + statement
    try:
        compile(python, "<magic>", "exec")
    except SyntaxError:
        return match.group(0)
    return indent + python


def write_atomic(file: SourceFile, text: str) -> None:
    """Replaces `file` by `text` in one step: a temporary file in the same directory, the
    original mode, then os.replace; the original stays untouched on any failure.

    Raises:
      ScanError: when the file is read-only, changed since it was read, or cannot be written.
    """
    target = os.path.realpath(file.path)
    mode = stat.S_IMODE(os.stat(target).st_mode)
    if not mode & stat.S_IWUSR:
        raise ScanError("file is read-only; not rewritten (fix: make it writable, or drop "
                        "--fix)")
    if _read(target, float("inf")) != file.raw:
        raise ScanError("file changed while it was being fixed; not rewritten (fix: run "
                        "again)")
    data = text.encode(file.encoding)
    handle, temp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".cg-scan-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise ScanError(f"cannot write: {err.strerror or err}; left unchanged (fix: check "
                        "free space and permissions)") from err
