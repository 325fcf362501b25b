"""Rows of a derivative at once (pfor), in a loop, or in chunks, and the rule that picks."""
