"""Applies the finder's edits with LibCST, so formatting and comments survive. Imported only by
`--diff` / `--fix`: scanning never pays for LibCST."""

from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

from compat_grads.migrate.findings import Finding

LINE_LENGTH = 100  # rewritten statements longer than this get their call's arguments wrapped


class FixError(Exception):
    """An edit did not land where the finder placed it; the file is left alone."""


def fix(source: str, findings: list[Finding]) -> str:
    """`source` with the edits of `findings` applied and their imports added once.

    Raises:
      FixError: when LibCST cannot parse the source or an edit finds no node to change.
    """
    try:
        module = MetadataWrapper(cst.parse_module(source))
    except cst.ParserSyntaxError as err:
        raise FixError(f"LibCST cannot parse it: {err.message}") from err
    imports = list(dict.fromkeys(i for f in findings if f.edits for i in f.imports))
    rewrite = _Rewrite(findings, imports, module.module)
    fixed = module.visit(rewrite)
    if rewrite.pending:
        (line, column), _ = min(rewrite.pending)
        raise FixError(f"no code found at line {line}, column {column + 1} to rewrite")
    return fixed.code


class _Rewrite(cst.CSTTransformer):
    """Replaces expressions and loops and deletes statements found by exact position; the
    comments of a deleted statement move to the statement that replaces it (the one of its
    block holding the finding's rewrite, before or after it; else the next statement kept),
    and those inside a loop or a multi-line expression replaced move above the replacement.
    Adds `imports` (those not already there) where they run before any rewritten code: see
    `_import_index`."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, findings: list[Finding], imports: list[str], module: cst.Module):
        super().__init__()
        self.module = module  # its indentation and newlines render the code measured
        edits = [e for f in findings for e in f.edits]
        self.imports = imports
        self.starts = [e.start for e in edits]
        self.replace = {(e.start, e.end): e.text for e in edits if e.text is not None}
        self.delete = {e.start for e in edits if e.text is None}
        self.pending = set(self.replace) | {(s, s) for s in self.delete}
        self.rewritten_at = _rewritten_at(findings)
        self.statements: list[tuple[cst.BaseStatement, list]] = []  # visited, with comments
        self.written: list[list[cst.BaseExpression]] = []  # per statement, the replacements

    def _range(self, node: cst.CSTNode) -> tuple[tuple[int, int], tuple[int, int]]:
        where = self.get_metadata(PositionProvider, node)
        return (where.start.line, where.start.column), (where.end.line, where.end.column)

    def on_visit(self, node):
        if isinstance(node, cst.BaseStatement):
            self.statements.append((node, []))
            self.written.append([])
        return super().on_visit(node)

    def on_leave(self, original_node, updated_node):
        updated_node = super().on_leave(original_node, updated_node)
        if isinstance(original_node, cst.BaseStatement):
            updated_node = self._wrapped(original_node, updated_node, self.written.pop())
            return _below_comments(updated_node, self.statements.pop()[1])
        key = self._range(original_node) if isinstance(original_node, cst.BaseExpression) else None
        if key not in self.replace:
            return updated_node
        self.pending.discard(key)
        # The comments inside a multi-line expression it replaces go above its statement.
        self.statements[-1][1].extend(_comments(original_node, ()))
        self.written[-1].append(cst.parse_expression(self.replace[key]))
        return self.written[-1][-1]

    def leave_IndentedBlock(self, original_node, updated_node):
        return updated_node.with_changes(body=self._kept(original_node.body, updated_node.body))

    def leave_Module(self, original_node, updated_node):
        indexed = self._kept(original_node.body, updated_node.body, indexed=True)
        present = {original_node.code_for_node(s).strip() for s in original_node.body}
        new = [cst.parse_statement(i + "\n") for i in self.imports if i not in present]
        at = self._import_index(original_node.body)
        split = sum(1 for index, _ in indexed if index < at)
        body = [node for _, node in indexed]
        return updated_node.with_changes(body=body[:split] + new + body[split:])

    def _import_index(self, body) -> int:
        """Where the new imports go (an index into the original top-level statements): after
        the last import of the module's import block, the leading statements an import may
        follow without flake8's E402 (a docstring, imports, `__dunder__` assignments, `if` /
        `try` / `with` statements), else after the docstring; never after code such as
        `tf.disable_v2_behavior()`, nor after the first statement that holds a rewrite, so
        they are bound before any rewritten code runs."""
        at = _after_docstring(body)
        for index, stmt in enumerate(body[at:], at):
            if not _in_import_block(stmt):
                break
            if _is_import(stmt) or m.findall(stmt, m.Import() | m.ImportFrom()):
                at = index + 1
        uses = [i for i, s in enumerate(body) if self._holds_edit(s)]
        return min([at, *uses])

    def _holds_edit(self, node: cst.CSTNode) -> bool:
        start, end = self._range(node)
        return any(start <= at < end for at in self.starts)

    def _kept(self, originals, updated, indexed: bool = False) -> list:
        deleted = [self._range(o)[0] in self.delete for o in originals]
        above: dict[int, tuple[list, list]] = {}  # kept position -> (lines before, after)
        for k, node in enumerate(updated):
            if deleted[k]:
                start = self._range(originals[k])[0]
                self.pending.discard((start, start))
                self._move_comments(node, k, self._home(originals, deleted, k), above)
        kept = []
        for k, (original, node) in enumerate(zip(originals, updated)):
            if not deleted[k]:
                before, after = above.get(k, ([], []))
                node = self._statement(original, node)
                node = node.with_changes(leading_lines=[*before, *node.leading_lines, *after])
                kept.append((k, node) if indexed else node)
        return kept

    def _home(self, originals, deleted, k) -> int | None:
        """Where the comments of the deleted statement `k` go: the kept statement of the block
        that holds its finding's rewrite, else the next kept one (else the one before)."""
        at = self.rewritten_at.get(self._range(originals[k])[0])
        kept = [j for j, gone in enumerate(deleted) if not gone]
        holders = [j for j in kept if at is not None
                   and self._range(originals[j])[0] <= at < self._range(originals[j])[1]]
        later = [j for j in kept if j > k]
        return (holders or later or kept[-1:] or [None])[0]

    @staticmethod
    def _move_comments(node, k: int, home: int | None, above: dict) -> None:
        """Adds the leading lines and comments of the deleted statement `node` (at `k`) above
        the statement at `home`: before its own leading lines when it comes after `k`, else
        (the comments only, no blank lines) right above it."""
        lines = [*node.leading_lines, *_comments(node, node.leading_lines)]
        if home is None:
            return
        before, after = above.setdefault(home, ([], []))
        if home > k:
            before.extend(lines)
        else:
            after.extend(line for line in lines if line.comment is not None)

    def _wrapped(self, original, node, written: list[cst.BaseExpression]):
        """`node` with the calls it got from edits wrapped while it is too long."""
        column = self.get_metadata(PositionProvider, original).start.column
        for expression in written:
            node = _shortened(self.module, node, _outer_call(expression), column)
        return node

    def _statement(self, original, node):
        """A compound statement (a loop) replaced whole by the statement an edit gives."""
        key = self._range(original)
        if not isinstance(original, cst.BaseCompoundStatement) or key not in self.replace:
            return node
        self.pending.discard(key)
        statement = cst.parse_statement(self.replace[key] + "\n")
        column = self.get_metadata(PositionProvider, original).start.column
        statement = _shortened(self.module, statement, _outer_call(statement), column)
        return statement.with_changes(
            leading_lines=[*node.leading_lines, *_comments(node, node.leading_lines)])


def _outer_call(node: cst.CSTNode) -> cst.Call | None:
    """The outermost call of a rewrite (`cg.f(...)`, the one in `[cg.hessian(...)]`)."""
    todo = [node]
    while todo:
        node = todo.pop(0)
        if isinstance(node, cst.Call) and node.args:
            return node
        todo += node.children
    return None


def _shortened(module: cst.Module, node: cst.CSTNode, call: cst.Call | None, column: int):
    """`node` (at `column`) with `call` in it wrapped as a formatter would while a line runs
    past LINE_LENGTH: its arguments on a hanging indent, else one per line."""
    for per_line in (False, True):
        if call is None or _fits(module, node, column):
            break
        wrapped = _wrap(call, per_line, module, column, 1, _line_indent(module, node, call))
        node, call = node.deep_replace(call, wrapped), wrapped
    return node


def _line_indent(module: cst.Module, node: cst.CSTNode, call: cst.Call) -> str:
    """The indentation, relative to the statement, of the line of `node` that `call` starts
    on: a call already on a continuation line (an argument of a call broken across lines)
    wraps one indent past that line, not past the statement."""
    code = module.code_for_node(node)
    before, found, _ = code.partition(module.code_for_node(call))
    if not found or "\n" not in before:
        return ""
    line = before.rpartition("\n")[2]
    return line[:len(line) - len(line.lstrip())]


def _fits(module: cst.Module, node: cst.CSTNode, column: int) -> bool:
    """Whether every line of `node`, starting at `column`, is at most LINE_LENGTH long (its
    trailing comment aside, which no wrapping shortens)."""
    if isinstance(node, cst.SimpleStatementLine):
        node = node.with_changes(trailing_whitespace=cst.TrailingWhitespace())
    lines = module.code_for_node(node).splitlines()
    return all(column + len(line) <= LINE_LENGTH for line in lines)


def _wrap(call: cst.Call, per_line: bool, module: cst.Module, column: int,
          depth: int, base: str = "") -> cst.Call:
    """`call` with its arguments on a continuation line `depth` indents past `base` (the
    indentation of the call's own line relative to the statement: inside the parentheses
    any indentation parses), or one per line, an argument call too long for its line
    wrapped one level deeper in turn."""
    pad = base + module.default_indent * depth
    args = list(call.args)
    if per_line:
        for k, arg in enumerate(args):
            value = arg.value
            # An indexed call (`f(...)[:, :n]`) wraps its call.
            inner = value.value if isinstance(value, cst.Subscript) else value
            if isinstance(inner, cst.Call) and inner.args and not _fits(
                    module, arg, column + len(pad) + 1):
                wrapped = _wrap(inner, True, module, column, depth + 1, base)
                value = wrapped if inner is value else value.with_changes(value=wrapped)
            comma = (cst.Comma(whitespace_after=_break(pad)) if k < len(args) - 1
                     else cst.MaybeSentinel.DEFAULT)
            args[k] = arg.with_changes(value=value, comma=comma)
    return call.with_changes(whitespace_before_args=_break(pad), args=args)


def _break(pad: str) -> cst.ParenthesizedWhitespace:
    """A line break inside parentheses, the next line `pad` past the statement's indent."""
    return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), indent=True,
                                       last_line=cst.SimpleWhitespace(pad))


def _rewritten_at(findings: list[Finding]) -> dict[tuple[int, int], tuple[int, int]]:
    """Where the finding of each deleted statement (by start) writes its rewrite."""
    found = {}
    for finding in findings:
        at = next((e.start for e in finding.edits if e.text is not None), None)
        found.update((e.start, at) for e in finding.edits if e.text is None and at)
    return found


def _below_comments(node: cst.BaseStatement, comments: list) -> cst.BaseStatement:
    """`node` with `comments` added right above it, below its own leading lines."""
    return node.with_changes(leading_lines=[*node.leading_lines, *comments]) if comments else node


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


def _in_import_block(stmt: cst.BaseStatement) -> bool:
    """Whether pycodestyle lets an import follow `stmt` (E402): an import, a `__dunder__`
    assignment, or an `if` / `try` / `with` statement (conditional imports)."""
    if isinstance(stmt, cst.If | cst.Try | cst.TryStar | cst.With):
        return True
    line = isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
    assign = stmt.body[0] if line else None
    target = (assign.targets[0].target if isinstance(assign, cst.Assign)
              and len(assign.targets) == 1 else assign.target
              if isinstance(assign, cst.AnnAssign) and assign.value is not None else None)
    dunder = isinstance(target, cst.Name) and re.fullmatch(r"__\w+__", target.value)
    return _is_import(stmt) or bool(dunder)


def _is_import(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body)


def _after_docstring(body) -> int:
    first = body[0] if body else None
    docstring = (isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Expr)
                 and isinstance(first.body[0].value, cst.SimpleString | cst.ConcatenatedString))
    return 1 if docstring else 0
