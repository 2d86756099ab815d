"""Fixtures shared by the Jupyter layer's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    """A real InteractiveShell (a singleton: cleared afterwards) with history in memory."""
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    instance = InteractiveShell.instance(config=config)
    try:
        yield instance
    finally:
        InteractiveShell.clear_instance()
