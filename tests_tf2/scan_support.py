"""What the scanner tests share: the corpus, its `# expect:` comments, and small files."""

import json
import pathlib
import re

from compat_grads import cli

CORPUS = pathlib.Path(__file__).resolve().parent / "scan_corpus"
_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)")


def expected(path: pathlib.Path) -> set:
    """(cell, line, code) from the `# expect: CODE` comments of a corpus file."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text("utf-8"))["cells"]
        texts = [(n, "".join(c["source"])) for n, c in enumerate(cells, 1)
                 if c["cell_type"] == "code"]
    else:
        texts = [(None, path.read_text("utf-8"))]
    return {(cell, line, code.strip()) for cell, text in texts
            for line, row in enumerate(text.splitlines(), 1)
            for match in _EXPECT.finditer(row) for code in match.group(1).split(",")}


def scan(capsys, *args) -> tuple[int, dict]:
    status = cli.main(["scan", "--format", "json", *map(str, args)])
    return status, json.loads(capsys.readouterr().out)


def bad(tmp_path, name, data: bytes) -> pathlib.Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def fixable(tmp_path, mode=0o640, text=None) -> pathlib.Path:
    path = tmp_path / "legacy.py"
    path.write_text(text or (CORPUS / "hessians.py").read_text("utf-8"), "utf-8")
    path.chmod(mode)
    return path
