"""Who may call the sessions API: the installed config file enables it, requests without
the server's token are refused, and changes made with the login cookie need jupyter_server's
XSRF cookie and header."""

from __future__ import annotations

import secrets

import httpx
import pytest

from mibyan_jupyter.store import SessionStore

from .api_server import ApiServer
from .conftest import add_session, error

pytestmark = pytest.mark.slow


# -- who may call --------------------------------------------------------------------------


def test_the_installed_config_file_enables_the_extension(api_server: ApiServer) -> None:
    assert not any("mibyan" in part for part in api_server.command())
    assert "mibyan_jupyter.server | extension was successfully loaded" in api_server.log()


def test_requests_without_the_token_are_refused(api_server: ApiServer, store: SessionStore) -> None:
    session = add_session(store, "private")
    with api_server.client(token=False) as anonymous:
        for method, path in (
            ("GET", "/sessions"),
            ("GET", "/sessions?q=sales"),
            ("GET", f"/sessions/{session}"),
            ("GET", f"/sessions/{session}/messages"),
            ("GET", f"/sessions/{session}/transcript"),
            ("GET", f"/sessions/{session}/export"),
            ("POST", f"/sessions/{session}/fork"),
            ("PATCH", f"/sessions/{session}"),
            ("DELETE", f"/sessions/{session}"),
        ):
            reply = anonymous.request(method, path, json={"title": "x", "at": None})
            error(reply, 403, "forbidden")
            wrong = {"Authorization": "token " + secrets.token_hex(16)}
            error(anonymous.request(method, path, headers=wrong), 403, "forbidden")
    assert store.get(session).title == "private"


def test_changes_by_cookie_need_the_xsrf_cookie_and_header(
    api_server: ApiServer, store: SessionStore
) -> None:
    session = add_session(store, "kept")
    with httpx.Client(base_url=f"{api_server.url}/mibyan/api", timeout=30) as browser:
        assert browser.get("/sessions", headers=api_server.auth()).status_code == 200
        assert any(name.startswith("username-") for name in browser.cookies)  # logged in
        assert browser.get("/sessions").status_code == 200  # the login cookie alone reads
        for method, path, body in (
            ("POST", f"/sessions/{session}/fork", {"at": None}),
            ("PATCH", f"/sessions/{session}", {"title": "changed"}),
            ("DELETE", f"/sessions/{session}", None),
        ):
            refused = error(browser.request(method, path, json=body), 403, "forbidden")
            assert "xsrf" in refused.lower()
            browser.cookies.set("_xsrf", "a" * 32)
            forged = {"X-XSRFToken": "b" * 32}
            forged_reply = browser.request(method, path, json=body, headers=forged)
            assert "xsrf" in error(forged_reply, 403, "forbidden").lower()
        assert store.get(session).title == "kept"
        assert not store.children(session)
        matching = {"X-XSRFToken": "a" * 32}
        reply = browser.patch(f"/sessions/{session}", json={"title": "renamed"}, headers=matching)
        assert reply.status_code == 200, reply.text
    assert store.get(session).title == "renamed"


def test_a_token_header_needs_no_xsrf(api: httpx.Client, store: SessionStore) -> None:
    """jupyter_server's rule: a token in a header cannot be sent by another site."""
    session = add_session(store, "by token")
    assert api.patch(f"/sessions/{session}", json={"title": "ok"}).status_code == 200
