"""What the command line prints while it works."""
