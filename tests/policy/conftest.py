"""The policy suite's store tests run on both backends too: tests/store_backend.py."""

from store_backend import backend

__all__ = ["backend"]
