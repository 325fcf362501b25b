"""Spies for tests: which of the library's internal shortcuts served a call."""

from __future__ import annotations


def served(monkeypatch, module, names) -> list:
    """Wraps each of `module`'s functions `names` so that every call appends whether it
    served (returned something other than None) to the returned list."""
    calls = []
    for name in names:
        real = getattr(module, name)

        def spy(*args, real=real):
            found = real(*args)
            calls.append(found is not None)
            return found
        monkeypatch.setattr(module, name, spy)
    return calls
