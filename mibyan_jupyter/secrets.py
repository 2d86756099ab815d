"""Keeping credentials out of everything that is shown or saved.

One module every layer can use (it imports only the standard library): the store scrubs
configs and messages with it before they reach SQLite, exports before they reach a
notebook, providers before an error reaches the user. What counts as a secret: every value
the process has used as an API key (:meth:`Redactor.add`) and the value of every
environment variable whose name says it holds one (``*_API_KEY``, ``*_TOKEN``,
``*_SECRET``, ``*_KEY``...), read each time, so a key set after import is covered too.

How short a secret is still replaced (the floor):

- A secret-named variable's value of :data:`MIN_SECRET` (4) characters or more is always
  redacted. Values of 1-3 characters are not: a credential that short is guessed in well
  under a million tries, so hiding it protects nothing, while replacing ``"1"``, ``"on"``
  or ``"dev"`` everywhere would rewrite ordinary numbers and words in every output, and
  a value that only says a feature is on (``true``, ``false``, ``none``, ``null``) is
  no credential either.
- A value shorter than :data:`ANYWHERE` (8) characters is replaced where it stands as a
  whole token (not inside a longer run of letters and digits), so a password ``test``
  is hidden in ``pw=test;`` but ``testing`` stays ``testing``. Longer values are replaced
  wherever they occur (inside a URL, glued to other text), as before.
- A key the process used (:meth:`Redactor.add`) counts from :data:`ANYWHERE` characters:
  real API keys are far longer, and a short "key" is a local server's placeholder
  (``ollama``, ``EMPTY``) whose replacement would blank the model's own name.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET = 4
"""The floor: shorter values (``"x"``, ``"1"``) are never replaced (see the module's text)."""
ANYWHERE = 8
"""Values at least this long are replaced anywhere; shorter ones only as whole tokens."""
NOT_SECRETS = frozenset({"true", "false", "none", "null"})
"""Values (any case) that only switch something on or off: never treated as secrets."""
_OUTSIDE_TOKEN_BEFORE = r"(?<![^\W_])"  # not preceded by a letter or digit
_OUTSIDE_TOKEN_AFTER = r"(?![^\W_])"

_SECRET_WORDS = frozenset(
    {"secret", "password", "passwd", "authorization", "cookie", "credential", "credentials"}
)
_SECRET_PAIRS = frozenset(
    {"apikey", "accesskey", "privatekey", "secretkey", "accesstoken", "authtoken", "refreshtoken"}
)


def _words(name: str) -> list[str]:
    """``openaiApiKey`` / ``OPENAI_API_KEY`` -> ``[openai, api, key]``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def is_secret_name(name: str, *, environment: bool = False) -> bool:
    """Whether a config key or variable name looks like it holds a credential (``api_key``,
    ``apiKey``, ``Authorization``, ``access_token``; not ``max_tokens``). For an
    ``environment`` variable any ``*_KEY`` counts too (``OPENAI_API_KEY``, ``GROQ_KEY``)."""
    words = _words(name)
    pairs = {a + b for a, b in itertools.pairwise(words)}
    last = words[-1] if words else ""
    return (
        bool(_SECRET_WORDS.intersection(words) or _SECRET_PAIRS & pairs)
        or last in ("token", "auth")
        or words == ["key"]
        or (environment and last == "key")
    )


class Redactor:
    """Replaces known secrets in text. Thread-safe; added keys are never forgotten."""

    def __init__(self) -> None:
        self._added: set[str] = set()
        self._env_names = 0
        self._secret_names: tuple[str, ...] = ()
        self._values: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= ANYWHERE and secret not in self._added:
            with self._lock:
                self._added.add(secret)
                self._values = frozenset()  # force a rebuild

    def _current(self) -> re.Pattern[str] | None:
        # Cheap on the hot path (every stored message): the names are classified again only
        # when the set of variable names changes; the few secret ones are re-read each time.
        names = hash(tuple(getattr(os.environ, "_data", os.environ)))  # raw keys: no decoding
        if names != self._env_names:
            self._env_names = names
            self._secret_names = tuple(n for n in os.environ if is_secret_name(n, environment=True))
        found = set(self._added)
        for name in self._secret_names:
            value = os.environ.get(name)
            if value is not None and _worth_hiding(value):
                found.add(value)
        values = frozenset(found)
        with self._lock:
            if values != self._values or (self._pattern is None and values):
                self._pattern = _pattern(values)
                self._values = values
            return self._pattern

    def __call__(self, text: str) -> str:
        pattern = self._current()
        return pattern.sub(REDACTED, text) if pattern is not None else text

    def many(self, *texts: str) -> list[str]:
        """Several texts against one reading of the secrets (the store's hot path)."""
        pattern = self._current()
        if pattern is None:
            return list(texts)
        return [pattern.sub(REDACTED, text) for text in texts]

    def scrub(self, value: Any) -> Any:
        """A JSON-ready copy of ``value``: secret-named mapping keys dropped, secret values
        replaced inside every string."""
        if isinstance(value, Mapping):
            return {str(k): self.scrub(v) for k, v in value.items() if not is_secret_name(str(k))}
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        if value is None or isinstance(value, bool | int | float):
            return value
        return self(str(value))


def _worth_hiding(value: str) -> bool:
    """Whether a secret-named variable's value is replaced (the floor, in the module's text)."""
    return len(value) >= MIN_SECRET and value.strip().lower() not in NOT_SECRETS


def _pattern(values: frozenset[str]) -> re.Pattern[str] | None:
    """One alternation, longest first (a key that contains another is replaced whole);
    values shorter than :data:`ANYWHERE` only match as whole tokens."""
    parts = [
        re.escape(value)
        if len(value) >= ANYWHERE
        else f"{_OUTSIDE_TOKEN_BEFORE}{re.escape(value)}{_OUTSIDE_TOKEN_AFTER}"
        for value in sorted(values, key=len, reverse=True)
    ]
    return re.compile("|".join(parts)) if parts else None


REDACT = Redactor()
"""The process-wide redactor."""


def scrub_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-ready copy of ``config`` without credentials."""
    cleaned = REDACT.scrub(config)
    assert isinstance(cleaned, dict)
    return cleaned
