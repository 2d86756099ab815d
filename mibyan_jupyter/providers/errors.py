"""Classifying provider failures, with hints that drive retries, fallback and compression.

Hermes' classifier, kept small: a failure gets a :data:`ErrorKind` and the hints say what
helps: wait and retry, fall over to the next model, compress the context, or refresh the
credential. Other 4xx errors are never retried (the same request would fail the same way).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeAlias

from mibyan_jupyter.secrets import REDACT

ErrorKind: TypeAlias = Literal[
    "auth",
    "billing",
    "rate_limit",
    "overloaded",
    "server_error",
    "timeout",
    "connection",
    "context_overflow",
    "payload_too_large",
    "model_not_found",
    "format_error",
    "bad_request",
    "incomplete_response",
    "budget_exhausted",
    "aborted",
]


@dataclass(frozen=True, slots=True)
class Hints:
    retryable: bool = False
    fall_back: bool = False
    compress: bool = False
    refresh_credential: bool = False


HINTS: dict[ErrorKind, Hints] = {
    "auth": Hints(fall_back=True, refresh_credential=True),
    "billing": Hints(fall_back=True),
    "rate_limit": Hints(retryable=True, fall_back=True),
    "overloaded": Hints(retryable=True, fall_back=True),
    "server_error": Hints(retryable=True, fall_back=True),
    "timeout": Hints(retryable=True, fall_back=True),
    "connection": Hints(retryable=True, fall_back=True),
    "context_overflow": Hints(compress=True),
    "payload_too_large": Hints(compress=True),
    "model_not_found": Hints(fall_back=True),
    "format_error": Hints(retryable=True, fall_back=True),
    "bad_request": Hints(),
    "incomplete_response": Hints(fall_back=True),
    "budget_exhausted": Hints(),
    "aborted": Hints(),
}


class ProviderError(Exception):
    """A classified failure of one model call. ``message`` is already redacted."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.code = code

    @property
    def hints(self) -> Hints:
        return HINTS[self.kind]

    def __str__(self) -> str:
        status = f"HTTP {self.status} " if self.status else ""
        return f"{status}{self.kind}: {self.message}"


_OVERFLOW = re.compile(
    r"context[_ ]length|context window|maximum context|too many tokens|prompt is too long|"
    r"input is too long|exceeds the (?:model'?s )?(?:context|maximum)|reduce the length|"
    r"(?:input|prompt) tokens? exceeds?",
    re.IGNORECASE,
)
_NOT_FOUND = re.compile(
    r"model.*(?:not found|does not exist|not exist|unknown)|no such model", re.IGNORECASE
)
_BILLING = re.compile(r"insufficient[_ ]quota|billing|credit balance|payment", re.IGNORECASE)
_RATE_LIMIT = re.compile(r"rate[_ -]?limit|too many requests|requests per min", re.IGNORECASE)
_PROXY_BUDGET = re.compile(
    r"budget_exceeded|budget has been exceeded|exceeded ?budget|over budget|crossed budget",
    re.IGNORECASE,
)
"""A spending proxy's refusal (LiteLLM's virtual-key budgets: HTTP 400 or 429 with
``"type": "budget_exceeded"`` and "Budget has been exceeded! Current cost: ..., Max
budget: ..."): billing, never retried (docs/architecture.md, "Admin policy")."""

# Error codes and types the providers send, in HTTP bodies and in stream error events alike
# (OpenAI ``code``/``type``, Anthropic ``error.type``, compatible servers' codes). A code
# says more than any message, so it is read first.
_CODES: dict[str, ErrorKind] = {
    "context_length_exceeded": "context_overflow",
    "context_window_exceeded": "context_overflow",
    "model_context_window_exceeded": "context_overflow",
    "request_too_large": "payload_too_large",
    "string_above_max_length": "payload_too_large",
    "rate_limit_exceeded": "rate_limit",
    "rate_limit_error": "rate_limit",
    "too_many_requests": "rate_limit",
    "insufficient_quota": "billing",
    "budget_exceeded": "billing",
    "billing_error": "billing",
    "billing_hard_limit_reached": "billing",
    "overloaded": "overloaded",
    "overloaded_error": "overloaded",
    "server_is_overloaded": "overloaded",
    "slow_down": "overloaded",
    "invalid_api_key": "auth",
    "authentication_error": "auth",
    "model_not_found": "model_not_found",
    "not_found_error": "model_not_found",
    "timeout_error": "timeout",
    "api_error": "server_error",
}
_BAD_REQUEST_CODES = frozenset(
    {"invalid_request_error", "invalid_prompt", "invalid_value", "bad_request", "400"}
)
"""Codes of a 400-class error: the same request fails the same way, unless the message
says the context is too long (then compression helps)."""


def classify_code(code: str | None) -> ErrorKind | None:
    """The kind a provider's error code or type names on its own, or ``None``."""
    return _CODES.get((code or "").strip().lower())


def classify_status(status: int, message: str, code: str | None = None) -> ErrorKind:
    """The kind of an HTTP error response."""
    text = f"{code or ''} {message}"
    if _PROXY_BUDGET.search(text):  # before 429: a proxy's budget is no rate limit
        return "billing"
    if status in (401, 403):
        return "billing" if _BILLING.search(text) else "auth"
    if status == 402 or _BILLING.search(text):
        return "billing"
    if status == 413:
        return "payload_too_large"
    if status == 429:
        return "rate_limit"
    if status in (529, 503) or "overloaded" in text.lower():
        return "overloaded"
    if status in (408, 504):
        return "timeout"
    if _OVERFLOW.search(text) or classify_code(code) == "context_overflow":
        return "context_overflow"
    if status == 404 or _NOT_FOUND.search(text):
        return "model_not_found"
    if status >= 500:
        return "server_error"
    return "bad_request"


def classify_stream_error(message: str, code: str | None = None) -> ErrorKind:
    """The kind of an error reported inside a stream (after HTTP 200), where there is no
    status to go by: the code first, then the message. A 400-class error (a context or
    token limit, an invalid request) is never a server error: retrying would send the
    same request and fail the same way, while a context overflow is what compression is
    for."""
    by_code = classify_code(code)
    if by_code is not None:
        return by_code
    if (code or "").strip().lower() in _BAD_REQUEST_CODES:
        return classify_status(400, message, code)
    text = f"{code or ''} {message}"
    if _OVERFLOW.search(text):
        return "context_overflow"
    if "overloaded" in text.lower():
        return "overloaded"
    if _PROXY_BUDGET.search(text):
        return "billing"
    if _RATE_LIMIT.search(text):
        return "rate_limit"
    if _BILLING.search(text):
        return "billing"
    return "server_error"


_ADVICE: dict[ErrorKind, str] = {
    "connection": "is the server running and the base URL right?",
    "timeout": "the server did not answer in time; try again, or raise the timeout",
    "auth": "check the API key",
    "billing": "check the account's quota or billing",
    "rate_limit": "wait a moment, or use --fallback",
    "overloaded": "try again later, or use --fallback",
    "server_error": "try again later, or use --fallback",
    "model_not_found": "check the model name (--model)",
}
_USERINFO = re.compile(r"//[^/@]*@")


def endpoint_text(url: str) -> str:
    """``url`` as safe to show: no user and password, no query string (keys hide there
    too), known secrets redacted."""
    return REDACT(_USERINFO.sub("//", url.split("?", 1)[0].split("#", 1)[0]))


def at_endpoint(error: ProviderError, url: str) -> ProviderError:
    """The error of a call that failed for good, naming the endpoint it failed at and what
    to do (one line for the cell: "connection: ConnectError" alone said neither)."""
    if error.kind not in _ADVICE or "(POST " in error.message:
        return error
    advice = _ADVICE[error.kind]
    if error.kind == "billing" and _PROXY_BUDGET.search(f"{error.code or ''} {error.message}"):
        advice = (
            "the spending proxy's budget for your key is used up; it resets when the "
            "proxy's budget period ends (ask your instructor or admin)"
        )
    message = f"{error.message} (POST {endpoint_text(url)}; {advice})"
    return ProviderError(
        error.kind, message, status=error.status, retry_after=error.retry_after, code=error.code
    )
