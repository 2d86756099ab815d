"""The store suite's tests run on both backends: tests/store_backend.py."""

from store_backend import backend

__all__ = ["backend"]
