"""The error bodies and in-stream error events the fake provider sends, per wire API.

Why they are worth a module: retry, failover and the user's error line are decided from
these bodies, so each status gets the body (type, code, message) a real server sends for it.
"""

from __future__ import annotations

from mibyan_jupyter.providers.base import ApiMode
from mibyan_jupyter.testing.scripts import Json
from mibyan_jupyter.testing.wire.common import sse
from mibyan_jupyter.testing.wire.responses import response_object

_OPENAI_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: (
        "invalid_request_error",
        "context_length_exceeded",
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 131072 tokens. Please reduce the length of the messages.",
    ),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden."),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model `{model}` does not exist or you do not have access to it.",
    ),
    413: ("invalid_request_error", "request_too_large", "Request too large."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for {model}. Please try again."),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: (
        "server_error",
        "overloaded",
        "The engine is currently overloaded, please try again later.",
    ),
    529: ("server_error", "overloaded", "The server is overloaded, please try again later."),
}
_ANTHROPIC_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
    401: ("authentication_error", "invalid x-api-key"),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "model: {model}"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."),
    500: ("api_error", "Internal server error"),
    503: ("overloaded_error", "Overloaded"),
    529: ("overloaded_error", "Overloaded"),
}


def error_body(api: ApiMode, status: int, *, message: str | None = None, model: str = "") -> Json:
    """The JSON body a real server sends with HTTP ``status`` (a plausible message per
    status: 400 is a context-length error, 404 a missing model)."""
    if api == "anthropic_messages":
        kind, text = _ANTHROPIC_ERRORS.get(status, ("api_error", f"HTTP {status}"))
        error = {"type": kind, "message": message or text.format(model=model)}
        return {"type": "error", "error": error, "request_id": "req_fake"}
    kind, code, text = _OPENAI_ERRORS.get(status, ("server_error", None, f"HTTP {status}"))
    text = message or text.format(model=model)
    return {"error": {"message": text, "type": kind, "param": None, "code": code}}


def stream_error_event(
    api: ApiMode,
    *,
    message: str | None,
    model: str,
    n: int,
    body: Json,
    sequence: int,
    status: int | None = None,
    payload: Json | None = None,
) -> bytes:
    """The error a server sends inside a stream after HTTP 200: overloaded by default; with
    ``status``, the error a real server reports for that status (its type, code and message,
    as :func:`error_body` has them: 400 a context-length error, 429 a rate limit), in the
    stream's own shape; with ``payload``, exactly that JSON (its ``type`` names the event)."""
    if payload is not None:
        kind = payload.get("type")
        return sse(payload, kind if isinstance(kind, str) and kind else "error")
    if status is not None:
        return _status_event(api, status, message=message, model=model, sequence=sequence)
    if api == "anthropic_messages":
        error = {"type": "overloaded_error", "message": message or "Overloaded"}
        return sse({"type": "error", "error": error}, "error")
    text = message or "The server is overloaded, please try again later."
    if api == "chat_completions":
        fields = {"message": text, "type": "server_error", "param": None, "code": "overloaded"}
        return sse({"error": fields}, "error")
    return _response_failed(
        {"code": "server_error", "message": text}, model=model, n=n, body=body, sequence=sequence
    )


def _status_event(
    api: ApiMode, status: int, *, message: str | None, model: str, sequence: int
) -> bytes:
    """The in-stream form of the error body of ``status``: Anthropic's ``event: error`` with
    its ``error`` object, Chat Completions' ``event: error`` with the OpenAI error object,
    and the Responses ``error`` event (flat ``code`` and ``message``)."""
    error = error_body(api, status, message=message, model=model)
    if api != "codex_responses":
        return sse(error, "error")
    fields = error["error"]
    data = {"type": "error", "code": fields["code"] or fields["type"], "message": fields["message"]}
    return sse(data | {"param": None, "sequence_number": sequence}, "error")


def _response_failed(error: Json, *, model: str, n: int, body: Json, sequence: int) -> bytes:
    failed = response_object(model=model, n=n, body=body, status="failed", output=[], error=error)
    data = {"type": "response.failed", "sequence_number": sequence, "response": failed}
    return sse(data, "response.failed")
