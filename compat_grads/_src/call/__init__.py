"""The path of a public call: options, specs, compile, distribute, value."""
