"""The public functions' families and their shared docs."""
