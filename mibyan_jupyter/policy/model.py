"""The admin policy's contents: a validated, frozen model, and how two files combine.

Pure (pydantic only), so every rule here is tested without files or a kernel. Why TOML: an
admin writes this file by hand on a hub, and TOML has comments (JSON has none), is read by
the standard library (``tomllib``, no new dependency) and has no surprising types (YAML's
``no`` is a boolean). Every field is optional; an empty policy restricts nothing.

Combining (:func:`strictest`): the system file may be joined by one file more (see
:mod:`.files`), and the result is never looser than either: lists of what is allowed are
intersected, lists of what is refused are joined, caps take the smaller value, a switch that
turns something off wins (docs/architecture.md, "Admin policy"; the lead merges the section
from /tmp/briefs6/doc-G.md).
"""

from __future__ import annotations

import fnmatch

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "AdminPolicy",
    "ApprovalFloor",
    "Caps",
    "Course",
    "Exam",
    "ModelRules",
    "Review",
    "ToolRules",
    "ValidationError",
    "error_lines",
    "strictest",
]


class _Strict(BaseModel):
    """Unknown keys are errors: a misspelt ``[exam] enabeld = true`` must not pass silently."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelRules(_Strict):
    allowed: tuple[str, ...] = ()
    """Globs over ``provider:model`` (``openai:gpt-4.1-*``); empty: any model."""
    providers: tuple[str, ...] = ()
    """Provider names (``openai``, ``anthropic``...); empty: any provider."""
    base_urls: tuple[str, ...] = ()
    """Globs over the model's base URL (the hub's spending proxy); empty: any URL."""

    def refusal(self, label: str, provider: str | None, base_url: str | None) -> str | None:
        """Why the policy refuses this model (``None``: it is allowed)."""
        if self.providers and (provider or "") not in self.providers:
            return f"provider {provider or '(none)'} is not allowed (allowed: {', '.join(self.providers)})"
        if self.allowed and not any(fnmatch.fnmatchcase(label, g) for g in self.allowed):
            return f"model {label} is not allowed (allowed: {', '.join(self.allowed)})"
        if self.base_urls and not any(
            fnmatch.fnmatchcase(base_url or "", g) for g in self.base_urls
        ):
            return f"the base URL of {label} is not allowed (allowed: {', '.join(self.base_urls)})"
        return None


class ToolRules(_Strict):
    disabled: tuple[str, ...] = ()
    """Tool group names: built-in groups, ``mcp`` (every server), ``mcp:NAME``, plugins."""

    def is_disabled(self, group: str) -> bool:
        return group in self.disabled or (group.startswith("mcp:") and "mcp" in self.disabled)


class ApprovalFloor(_Strict):
    always_ask: tuple[str, ...] = ()
    """Tool-name globs that are asked every time: no ``--approve auto``, no remembered
    "for this session" or "always" answer settles them."""
    allow_always_rules: bool = True
    """False: saved "always" rules are ignored and an "always" click counts for the session."""
    allow_auto_approve: bool = True
    """False: ``--approve auto`` (and ``MIBYAN_APPROVE=auto``) act as ``ask``."""

    def asks_always(self, tool: str) -> bool:
        return any(fnmatch.fnmatchcase(tool, glob) for glob in self.always_ask)


class Caps(_Strict):
    daily_cost_per_user: float | None = Field(default=None, ge=0)
    """US dollars one user may spend per UTC day, over all their sessions."""
    daily_tokens_per_user: int | None = Field(default=None, ge=0)
    """Tokens (input + output) one user may use per UTC day."""


class Exam(_Strict):
    enabled: bool = False
    message: str = "The AI assistant is turned off for the exam."


class Review(_Strict):
    reviewable: bool = False
    """True: instructors can read their students' conversations; the view header says so."""
    retention_days: int | None = Field(default=None, ge=1)
    """Sessions older than this are purged by ``mibyan-admin purge``."""


class Course(_Strict):
    instructors: tuple[str, ...] = ()
    students: tuple[str, ...] = ()
    caps: Caps = Caps()
    """Per-user daily caps for this course's students, instead of the global ones (a
    student of several courses gets the largest)."""


class AdminPolicy(_Strict):
    models: ModelRules = ModelRules()
    tools: ToolRules = ToolRules()
    approval: ApprovalFloor = ApprovalFloor()
    caps: Caps = Caps()
    exam: Exam = Exam()
    review: Review = Review()
    courses: dict[str, Course] = {}

    def courses_of(self, user: str, role: str = "students") -> list[str]:
        """The courses where ``user`` is one of ``role`` (``students`` / ``instructors``)."""
        return sorted(n for n, c in self.courses.items() if user in getattr(c, role))

    def caps_for(self, user: str) -> Caps:
        """The daily caps of ``user``: their courses' (the largest), else the global ones."""
        own = [self.courses[name].caps for name in self.courses_of(user)]
        cost = [c.daily_cost_per_user for c in own if c.daily_cost_per_user is not None]
        tokens = [c.daily_tokens_per_user for c in own if c.daily_tokens_per_user is not None]
        return Caps(
            daily_cost_per_user=max(cost) if cost else self.caps.daily_cost_per_user,
            daily_tokens_per_user=max(tokens) if tokens else self.caps.daily_tokens_per_user,
        )


def error_lines(error: ValidationError, source: str) -> list[str]:
    """One line per problem: ``policy.toml: caps.daily_cost_per_user: Input should be...``."""
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(top)"
        lines.append(f"{source}: {where}: {item['msg']}")
    return lines


def _both(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    """The intersection of two allow-lists, where empty means "anything"."""
    if not a or not b:
        return a or b
    return tuple(x for x in a if x in b) or ("(nothing: the policy files allow no common value)",)


def _least(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _caps(a: Caps, b: Caps) -> Caps:
    tokens = _least(a.daily_tokens_per_user, b.daily_tokens_per_user)
    return Caps(
        daily_cost_per_user=_least(a.daily_cost_per_user, b.daily_cost_per_user),
        daily_tokens_per_user=None if tokens is None else int(tokens),
    )


def _courses(a: dict[str, Course], b: dict[str, Course]) -> dict[str, Course]:
    joined = dict(a)
    for name, course in b.items():
        old = joined.get(name)
        joined[name] = (
            course
            if old is None
            else Course(
                instructors=tuple(dict.fromkeys(old.instructors + course.instructors)),
                students=tuple(dict.fromkeys(old.students + course.students)),
                caps=_caps(old.caps, course.caps),
            )
        )
    return joined


def strictest(a: AdminPolicy, b: AdminPolicy) -> AdminPolicy:
    """``a`` and ``b`` together, never looser than either (see the module docstring)."""
    retention = _least(a.review.retention_days, b.review.retention_days)
    exam = a.exam if a.exam.enabled or not b.exam.enabled else b.exam
    return AdminPolicy(
        models=ModelRules(
            allowed=_both(a.models.allowed, b.models.allowed),
            providers=_both(a.models.providers, b.models.providers),
            base_urls=_both(a.models.base_urls, b.models.base_urls),
        ),
        tools=ToolRules(disabled=tuple(dict.fromkeys(a.tools.disabled + b.tools.disabled))),
        approval=ApprovalFloor(
            always_ask=tuple(dict.fromkeys(a.approval.always_ask + b.approval.always_ask)),
            allow_always_rules=a.approval.allow_always_rules and b.approval.allow_always_rules,
            allow_auto_approve=a.approval.allow_auto_approve and b.approval.allow_auto_approve,
        ),
        caps=_caps(a.caps, b.caps),
        exam=exam,
        review=Review(
            reviewable=a.review.reviewable or b.review.reviewable,
            retention_days=None if retention is None else int(retention),
        ),
        courses=_courses(a.courses, b.courses),
    )
