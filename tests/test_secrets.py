"""Secrets of every length under a secret-named variable are redacted, down to a floor
(mibyan_jupyter/secrets.py says why): from 4 characters always, as whole tokens below 8,
anywhere from 8; 1-3 characters and on/off words never."""

from __future__ import annotations

import pytest

from mibyan_jupyter.secrets import ANYWHERE, MIN_SECRET, REDACTED, Redactor


@pytest.fixture
def redact(monkeypatch: pytest.MonkeyPatch) -> Redactor:
    for name, value in {
        "DB_PASSWORD": "hunter2",  # 7: a whole token
        "PIN_SECRET": "4711",  # 4: the floor
        "SHORT_TOKEN": "ab1",  # 3: under the floor
        "FEATURE_TOKEN": "true",  # switches something on: no credential
        "LONG_API_KEY": "sk-0123456789",  # 13: anywhere
    }.items():
        monkeypatch.setenv(name, value)
    return Redactor()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password: hunter2.", f"password: {REDACTED}."),
        ("pw=hunter2;pin=4711", f"pw={REDACTED};pin={REDACTED}"),
        ('{"pin": "4711"}', f'{{"pin": "{REDACTED}"}}'),
        ("hunter22 and 47110 and xhunter2", "hunter22 and 47110 and xhunter2"),
        ("ab1 true True", "ab1 true True"),
        ("Bearer sk-0123456789xyz", f"Bearer {REDACTED}xyz"),
        ("url?key=sk-0123456789&pin=4711", f"url?key={REDACTED}&pin={REDACTED}"),
    ],
)
def test_every_length_from_the_floor_is_redacted(
    redact: Redactor, text: str, expected: str
) -> None:
    assert redact(text) == expected
    assert redact.many(text, text) == [expected, expected]


def test_the_floor_and_the_reach_are_documented_numbers() -> None:
    assert (MIN_SECRET, ANYWHERE) == (4, 8)


def test_a_key_the_process_used_counts_from_eight(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor()
    redactor.add("ollama")  # a local server's placeholder: the model's own name stays
    redactor.add("literal-key-1")
    assert redactor("ollama:llama3.1 literal-key-1") == f"ollama:llama3.1 {REDACTED}"
