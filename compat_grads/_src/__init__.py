"""compat_grads' private code, one folder per job (see CONTRIBUTING.md)."""
