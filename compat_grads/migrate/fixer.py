"""Applies the finder's edits with LibCST, so formatting and comments survive. Imported only by
`--diff` / `--fix`: scanning never pays for LibCST."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from compat_grads.migrate.finder import Edit, Finding


class FixError(Exception):
    """An edit did not land where the finder placed it; the file is left alone."""


def fix(source: str, findings: list[Finding]) -> str:
    """`source` with the edits of `findings` applied and their imports added once.

    Raises:
      FixError: when LibCST cannot parse the source or an edit finds no node to change.
    """
    edits = [e for f in findings for e in f.edits]
    try:
        module = MetadataWrapper(cst.parse_module(source))
    except cst.ParserSyntaxError as err:
        raise FixError(f"LibCST cannot parse it: {err.message}") from err
    rewrite = _Rewrite(edits)
    fixed = module.visit(rewrite)
    if rewrite.pending:
        raise FixError(f"no code found at line {min(rewrite.pending)[0]} to rewrite")
    imports = list(dict.fromkeys(i for f in findings if f.edits for i in f.imports))
    return _add_imports(fixed, imports).code


class _Rewrite(cst.CSTTransformer):
    """Replaces expressions and deletes statements found by exact position; the comments of
    a deleted statement move to the next statement kept."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, edits: list[Edit]):
        super().__init__()
        self.replace = {(e.start, e.end): e.text for e in edits if e.text is not None}
        self.delete = {e.start for e in edits if e.text is None}
        self.pending = set(self.replace) | {(s, s) for s in self.delete}

    def _range(self, node: cst.CSTNode) -> tuple[tuple[int, int], tuple[int, int]]:
        where = self.get_metadata(PositionProvider, node)
        return (where.start.line, where.start.column), (where.end.line, where.end.column)

    def on_leave(self, original_node, updated_node):
        updated_node = super().on_leave(original_node, updated_node)
        if not isinstance(original_node, cst.BaseExpression):
            return updated_node
        key = self._range(original_node)
        if key not in self.replace:
            return updated_node
        self.pending.discard(key)
        return cst.parse_expression(self.replace[key])

    def leave_IndentedBlock(self, original_node, updated_node):
        return updated_node.with_changes(body=self._kept(original_node.body, updated_node.body))

    def leave_Module(self, original_node, updated_node):
        return updated_node.with_changes(body=self._kept(original_node.body, updated_node.body))

    def _kept(self, originals, updated) -> list[cst.BaseStatement]:
        kept, carried = [], []
        for original, node in zip(originals, updated):
            start = self._range(original)[0]
            if start in self.delete:
                self.pending.discard((start, start))
                carried += [*node.leading_lines, *_comments(node, node.leading_lines)]
            else:
                kept.append(node.with_changes(leading_lines=[*carried, *node.leading_lines])
                            if carried else node)
                carried = []
        return kept


def _comments(node: cst.CSTNode, skip) -> list[cst.EmptyLine]:
    """Every comment inside `node` but those in `skip`, as lines of their own."""
    found = []

    class Collect(cst.CSTVisitor):
        def visit_EmptyLine(self, line: cst.EmptyLine) -> bool:
            return line not in skip

        def visit_Comment(self, comment: cst.Comment) -> None:
            found.append(cst.EmptyLine(comment=comment))

    node.visit(Collect())
    return found


def _add_imports(module: cst.Module, imports: list[str]) -> cst.Module:
    """Adds each import statement not already present, after the last top-level import."""
    present = {module.code_for_node(s).strip() for s in module.body}
    new = [cst.parse_statement(i + "\n") for i in imports if i not in present]
    if not new:
        return module
    body = list(module.body)
    at = max((i + 1 for i, s in enumerate(body) if _is_import(s)), default=_after_docstring(body))
    return module.with_changes(body=body[:at] + new + body[at:])


def _is_import(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body)


def _after_docstring(body: list[cst.BaseStatement]) -> int:
    first = body[0] if body else None
    docstring = (isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Expr)
                 and isinstance(first.body[0].value, cst.SimpleString | cst.ConcatenatedString))
    return 1 if docstring else 0
