"""Compiled (Cython) twins of the hot paths, built from cython_ext/*.pyx."""
