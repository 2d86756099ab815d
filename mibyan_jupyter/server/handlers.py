"""The sessions API's routes under ``<base_url>/mibyan/api/``: parse, run, answer.

Every route is a jupyter_server ``APIHandler``: ``@web.authenticated`` (no token or login
cookie: 403) and ``@authorized`` (the server's authorizer decides, resource ``mibyan``),
and jupyter_server checks XSRF on every non-GET request that is not token-authenticated.
No route runs a model. The work runs on the store's thread (:class:`.service.StoreService`);
whatever fails answers ``{"error": "<one line>", "code": ...}`` (:meth:`ApiHandler.write_error`),
never a traceback (docs/architecture.md, "The sessions API").
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from http.client import responses
from typing import TYPE_CHECKING, Any, TypeVar, get_args

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from mibyan_jupyter.server.errors import ApiError, bad_request, first_line
from mibyan_jupyter.server.service import StoreService
from mibyan_jupyter.server.shapes import ErrorCode, ErrorJSON, ExportFormat

if TYPE_CHECKING:
    from mibyan_jupyter.server import documents, sessions
    from mibyan_jupyter.store.sessions import SessionStore
else:

    class _Lazy:
        """A module imported when first used: the work modules load the store, the core
        and export/ (~0.3 s), which the server's start must not wait for; they are used
        on the store's thread only, after :meth:`StoreService.warm` imported them there."""

        def __init__(self, name: str) -> None:
            self._name = name

        def __getattr__(self, attribute: str) -> Any:
            return getattr(importlib.import_module(self._name), attribute)

    documents = _Lazy("mibyan_jupyter.server.documents")
    sessions = _Lazy("mibyan_jupyter.server.sessions")

WORK_MODULES = ("mibyan_jupyter.server.sessions", "mibyan_jupyter.server.documents")
AUTH_RESOURCE = "mibyan"
NOT_LOGGED_IN = (
    "not logged in to this Jupyter server: send its token (Authorization: token ...) or its"
    " login cookie"
)
PAGE_MAX = 500
T = TypeVar("T")


class ApiHandler(APIHandler):
    """What every route shares: the store service, arguments, bodies and errors."""

    auth_resource = AUTH_RESOURCE
    service: StoreService

    def initialize(self, service: StoreService) -> None:
        self.service = service

    async def work(self, job: Callable[[SessionStore], T]) -> T:
        """``job(store)`` on the store's thread."""
        return await self.service.call(job)

    def reply(self, body: Mapping[str, Any], status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(body))

    def number(self, name: str, default: int, low: int, high: int) -> int:
        """The integer query argument ``name`` (``default`` when absent), in bounds."""
        raw = self.get_query_argument(name, None)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            raise bad_request(f"{name!r} must be a whole number, not {raw[:40]!r}") from None
        if not low <= value <= high:
            raise bad_request(f"{name!r} must be between {low} and {high}")
        return value

    def body(self) -> dict[str, Any]:
        """The request's JSON object."""
        try:
            parsed = json.loads(self.request.body or b"{}")
        except (ValueError, UnicodeDecodeError):
            raise bad_request("the body must be a JSON object") from None
        if not isinstance(parsed, dict):
            raise bad_request("the body must be a JSON object")
        return parsed

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Every error as ``{"error", "code"}`` (jupyter_server's own 403s included)."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        code: ErrorCode
        if isinstance(error, ApiError):
            code, message = error.code, error.message
        else:
            code = _code(status_code)
            message = NOT_LOGGED_IN if code == "forbidden" else responses.get(status_code, "error")
            if isinstance(error, web.HTTPError) and error.log_message:
                message = error.log_message % error.args if error.args else error.log_message
            elif error is not None and not isinstance(error, web.HTTPError):
                message = f"the sessions API failed: {first_line(error)}"
        self.set_header("Content-Type", "application/json")
        reply: ErrorJSON = {"error": message, "code": code}
        self.finish(json.dumps(reply))


def _code(status: int) -> ErrorCode:
    if status in (401, 403):
        return "forbidden"
    if status == 404:
        return "not_found"
    if status == 409:
        return "leased"
    return "bad_request" if 400 <= status < 500 else "store"


class SessionsHandler(ApiHandler):
    """``GET sessions?limit&offset`` (a page), ``GET sessions?q=TEXT&limit`` (search), or
    ``GET sessions?scope=course&limit&offset`` (an instructor's students', team store)."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        text = self.get_query_argument("q", "") or ""
        if text.strip():
            limit = self.number("limit", 20, 1, PAGE_MAX)
            self.reply(
                await self.work(lambda store: sessions.search_sessions(store, text, limit=limit))
            )
            return
        limit = self.number("limit", 50, 1, PAGE_MAX)
        offset = self.number("offset", 0, 0, 2**62)
        if self.get_query_argument("scope", "") == "course":  # an instructor's students'
            listed = await self.work(
                lambda store: sessions.course_sessions(store, limit=limit, offset=offset)
            )
            self.reply(listed)
            return
        self.reply(
            await self.work(lambda store: sessions.list_sessions(store, limit=limit, offset=offset))
        )


class SessionHandler(ApiHandler):
    """``GET``, ``PATCH`` (rename) and ``DELETE`` one session."""

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        self.reply(await self.work(lambda store: sessions.one_session(store, session_id)))

    @web.authenticated
    @authorized
    async def patch(self, session_id: str) -> None:
        title = self.body().get("title")
        self.reply(await self.work(lambda store: sessions.rename(store, session_id, title)))

    @web.authenticated
    @authorized
    async def delete(self, session_id: str) -> None:
        await self.work(lambda store: sessions.delete(store, session_id))
        self.set_status(204)
        self.finish()


class MessagesHandler(ApiHandler):
    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        offset = self.number("offset", 0, 0, 2**62)
        limit = self.number("limit", 100, 1, PAGE_MAX)
        page = await self.work(
            lambda store: documents.messages_page(store, session_id, offset=offset, limit=limit)
        )
        self.reply(page)


class TranscriptHandler(ApiHandler):
    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        self.reply(await self.work(lambda store: documents.transcript(store, session_id)))


class ExportHandler(ApiHandler):
    """The export as a download, with ``X-Mibyan-Includes`` saying what it holds."""

    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        fmt = self.get_query_argument("format", "ipynb")
        if fmt not in get_args(ExportFormat):
            raise bad_request("'format' must be 'ipynb' or 'md'")
        chosen: ExportFormat = "md" if fmt == "md" else "ipynb"
        download = await self.work(lambda store: documents.export(store, session_id, chosen))
        self.set_header("Content-Disposition", download.disposition())
        self.set_header("X-Mibyan-Includes", download.includes)
        self.set_header("Cache-Control", "no-store")
        self.finish(download.body, set_content_type=download.content_type)


class ForkHandler(ApiHandler):
    @web.authenticated
    @authorized
    async def post(self, session_id: str) -> None:
        at = self.body().get("at")
        if at is not None and (isinstance(at, bool) or not isinstance(at, int)):
            raise bad_request("'at' must be a whole number of messages, or null")
        self.reply(await self.work(lambda store: sessions.fork(store, session_id, at)), status=201)


def routes(base_url: str, service: StoreService) -> list[tuple[str, type, dict[str, Any]]]:
    """The API's URL patterns under ``base_url``, each handler given ``service``."""
    api = url_path_join(base_url, "mibyan", "api", "sessions")
    one = api + "/([^/]+)"
    table: list[tuple[str, type]] = [
        (api, SessionsHandler),
        (one, SessionHandler),
        (one + "/messages", MessagesHandler),
        (one + "/transcript", TranscriptHandler),
        (one + "/export", ExportHandler),
        (one + "/fork", ForkHandler),
    ]
    return [(pattern, handler, {"service": service}) for pattern, handler in table]
