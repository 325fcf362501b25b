"""The finding codes: stable identifiers, one per legacy idiom, made from the rule modules
(`migrate/rules/`), which document them (docs/scan.rst shows their docs)."""

from __future__ import annotations

from compat_grads.migrate.rules import RULES

CODES = {rule.code: rule for rule in RULES}


def select(selected: list[str], ignored: list[str]) -> set[str]:
    """The codes to report: those matching a `selected` prefix, minus `ignored` prefixes.

    Args:
      selected: code prefixes (`["CG1"]`, `["CG101", "CG105"]`); empty means all codes.
      ignored: code prefixes to leave out.

    Returns:
      The set of codes.

    Raises:
      ValueError: for a prefix that matches no code.
    """
    for prefix in selected + ignored:
        if not any(code.startswith(prefix.upper()) for code in CODES):
            raise ValueError(f"unknown code {prefix!r} (known: {', '.join(CODES)})")
    chosen = {c for c in CODES if not selected or any(c.startswith(p.upper()) for p in selected)}
    return {c for c in chosen if not any(c.startswith(p.upper()) for p in ignored)}
