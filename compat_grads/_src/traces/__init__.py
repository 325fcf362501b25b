"""Laplacians, divergences and Hessian diagonals: the forward walk and its rules."""
