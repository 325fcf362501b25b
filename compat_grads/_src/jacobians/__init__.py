"""Jacobians composed from the backends' products."""
