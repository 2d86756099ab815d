"""The fake provider's own context window: counted from the wire body, independently of the
agent's estimator, refused with the error each real API sends."""

from __future__ import annotations

import json

from mibyan_jupyter.providers.errors import classify_status
from mibyan_jupyter.testing.context_window import check_window, request_tokens


def chat_body(text: str) -> bytes:
    return json.dumps(
        {
            "model": "m",
            "stream": True,
            "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": text}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        }
    ).encode()


def test_tokens_are_counted_from_what_the_model_reads() -> None:
    body = json.loads(chat_body("x" * 3000))
    assert 1000 <= request_tokens(body) <= 1010
    body["model"] = "a-very-long-model-name" * 100  # not read by the model: not counted
    assert request_tokens(body) <= 1010
    assert request_tokens({"system": "é" * 300, "messages": []}) == 200  # UTF-8 bytes / 3


def test_a_request_that_fits_passes_and_one_that_does_not_gets_a_real_error() -> None:
    assert check_window("chat_completions", chat_body("x" * 3000), 2000) is None
    assert check_window("chat_completions", chat_body("x" * 3000), None) is None
    refused = check_window("chat_completions", chat_body("x" * 30000), 2000)
    assert refused is not None
    assert refused.status == 400
    assert refused.body["error"]["code"] == "context_length_exceeded"
    assert "maximum context length is 2000 tokens" in refused.body["error"]["message"]
    anthropic = check_window("anthropic_messages", chat_body("x" * 30000), 2000)
    assert anthropic is not None
    assert anthropic.body["error"]["message"].startswith("prompt is too long:")
    assert check_window("chat_completions", b"not json", 10) is None
    for body in (refused.body, anthropic.body):  # the agent's own classifier reads them so
        error = body["error"]
        assert classify_status(400, error["message"], error.get("code")) == "context_overflow"
