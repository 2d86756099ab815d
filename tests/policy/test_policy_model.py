"""The admin policy's contents, pure: validation says every problem in one line each, an
empty policy restricts nothing, and two files together are never looser than either."""

from __future__ import annotations

import pytest

from mibyan_jupyter.policy.model import (
    AdminPolicy,
    ValidationError,
    error_lines,
    strictest,
)


def policy(data: dict[str, object]) -> AdminPolicy:
    return AdminPolicy.model_validate(data)


def test_an_empty_policy_restricts_nothing() -> None:
    empty = AdminPolicy()
    assert empty.models.refusal("openai:gpt-4.1", "openai", "https://api.openai.com/v1") is None
    assert not empty.tools.is_disabled("shell")
    assert not empty.approval.asks_always("run_shell")
    assert empty.approval.allow_always_rules
    assert empty.approval.allow_auto_approve
    assert empty.caps_for("alice").daily_cost_per_user is None
    assert not empty.exam.enabled
    assert not empty.review.reviewable


def test_each_problem_is_one_line_naming_where() -> None:
    with pytest.raises(ValidationError) as caught:
        policy({"exam": {"enabeld": True}, "caps": {"daily_cost_per_user": -1}})
    lines = error_lines(caught.value, "/etc/jupyter/mibyan/policy.toml")
    assert len(lines) == 2
    assert any("exam.enabeld: Extra inputs are not permitted" in line for line in lines)
    assert any(
        "caps.daily_cost_per_user: Input should be greater than or equal to 0" in line
        for line in lines
    )
    assert all(line.startswith("/etc/jupyter/mibyan/policy.toml: ") for line in lines)


def test_models_providers_and_base_urls_are_allow_lists() -> None:
    rules = policy(
        {
            "models": {
                "allowed": ["openai:gpt-4.1-*"],
                "providers": ["openai"],
                "base_urls": ["http://proxy.hub:4000/*"],
            }
        }
    ).models
    assert rules.refusal("openai:gpt-4.1-mini", "openai", "http://proxy.hub:4000/v1") is None
    assert "provider anthropic is not allowed" in (
        rules.refusal("anthropic:claude-x", "anthropic", "http://proxy.hub:4000/v1") or ""
    )
    assert "model openai:gpt-5 is not allowed" in (
        rules.refusal("openai:gpt-5", "openai", "http://proxy.hub:4000/v1") or ""
    )
    assert "base URL" in (
        rules.refusal("openai:gpt-4.1-mini", "openai", "https://api.openai.com/v1") or ""
    )


def test_disabling_mcp_disables_every_server() -> None:
    tools = policy({"tools": {"disabled": ["mcp", "shell"]}}).tools
    assert tools.is_disabled("mcp:github")
    assert tools.is_disabled("shell")
    assert not tools.is_disabled("python")


def test_a_course_cap_replaces_the_global_one_for_its_students() -> None:
    admin = policy(
        {
            "caps": {"daily_cost_per_user": 1.0},
            "courses": {
                "ml101": {"students": ["alice"], "caps": {"daily_cost_per_user": 2.0}},
                "ml102": {"students": ["alice"], "caps": {"daily_cost_per_user": 3.0}},
                "art": {"instructors": ["prof"], "students": ["bob"]},
            },
        }
    )
    assert admin.caps_for("alice").daily_cost_per_user == 3.0  # the largest of her courses
    assert admin.caps_for("bob").daily_cost_per_user == 1.0  # his course sets none
    assert admin.courses_of("prof", "instructors") == ["art"]
    assert admin.courses_of("alice") == ["ml101", "ml102"]


def test_two_files_together_are_never_looser_than_either() -> None:
    a = policy(
        {
            "models": {"providers": ["openai", "anthropic"]},
            "tools": {"disabled": ["shell"]},
            "approval": {"always_ask": ["run_shell"]},
            "caps": {"daily_cost_per_user": 2.0},
            "review": {"retention_days": 90},
            "courses": {"c": {"students": ["alice"]}},
        }
    )
    b = policy(
        {
            "models": {"providers": ["openai"]},
            "tools": {"disabled": ["mcp"]},
            "approval": {"allow_always_rules": False, "always_ask": ["write_file"]},
            "caps": {"daily_cost_per_user": 5.0, "daily_tokens_per_user": 1000},
            "exam": {"enabled": True, "message": "Exam until noon."},
            "review": {"reviewable": True, "retention_days": 30},
            "courses": {"c": {"instructors": ["prof"], "students": ["bob"]}},
        }
    )
    for joined in (strictest(a, b), strictest(b, a)):
        assert joined.models.providers == ("openai",)
        assert set(joined.tools.disabled) == {"shell", "mcp"}
        assert set(joined.approval.always_ask) == {"run_shell", "write_file"}
        assert not joined.approval.allow_always_rules
        assert joined.caps.daily_cost_per_user == 2.0
        assert joined.caps.daily_tokens_per_user == 1000
        assert joined.exam.enabled
        assert joined.exam.message == "Exam until noon."
        assert joined.review.reviewable
        assert joined.review.retention_days == 30
        assert set(joined.courses["c"].students) == {"alice", "bob"}
        assert joined.courses["c"].instructors == ("prof",)


def test_allow_lists_with_nothing_in_common_allow_nothing() -> None:
    joined = strictest(
        policy({"models": {"providers": ["openai"]}}),
        policy({"models": {"providers": ["anthropic"]}}),
    )
    assert joined.models.refusal("openai:gpt-4.1", "openai", None) is not None
    assert joined.models.refusal("anthropic:claude", "anthropic", None) is not None
