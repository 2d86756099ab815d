"""The sessions API's errors: one status, one code, one clear line, never a traceback.

Why one exception type: a route's work runs on the store's thread (see :mod:`.service`),
and whatever goes wrong there, a bad id, a session that is gone, a database that cannot be
read, must reach the panel as ``{"error": ..., "code": ...}`` (docs/architecture.md, "The
sessions API"). :func:`translate` is the one place a store failure becomes such an error.
"""

from __future__ import annotations

import sqlite3

from tornado.web import HTTPError

from mibyan_jupyter.server.shapes import ErrorCode


class ApiError(HTTPError):
    """A refused or failed request, as the API answers it."""

    def __init__(self, status: int, code: ErrorCode, message: str) -> None:
        super().__init__(status, log_message=message.replace("%", "%%"))
        self.code: ErrorCode = code
        self.message = message


def bad_request(message: str) -> ApiError:
    return ApiError(400, "bad_request", message)


def first_line(error: BaseException) -> str:
    """The error's message in one line (its type's name when it has none)."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def translate(error: Exception) -> ApiError:
    """The API's answer to an exception raised by the store or a route's work (called on
    the store's thread, where the store is imported already)."""
    from mibyan_jupyter.store.files import StoreError
    from mibyan_jupyter.store.session_queries import AmbiguousSessionError, SessionNotFoundError

    if isinstance(error, ApiError):
        return error
    if isinstance(error, SessionNotFoundError):
        return ApiError(404, "not_found", first_line(error))
    if isinstance(error, AmbiguousSessionError):
        return bad_request(first_line(error))
    if isinstance(error, StoreError):
        return ApiError(500, "store", f"the session store cannot be used: {first_line(error)}")
    if isinstance(error, sqlite3.Error):
        return ApiError(500, "store", f"the session store failed: {first_line(error)}")
    return ApiError(
        500, "store", f"the sessions API failed: {type(error).__name__}: {first_line(error)}"
    )
