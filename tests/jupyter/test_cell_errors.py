"""A run that ends in a provider error ends its cell with one red ``AgentFailed`` line
naming the endpoint and what to do, so Run All stops there (a failed call used to end the
cell "ok"). In a real IPython shell, over loopback HTTP to the fake server."""

from __future__ import annotations

from IPython.core.interactiveshell import InteractiveShell

from mibyan_jupyter.testing import FakeProviderServer, Fault


def test_a_cell_whose_model_call_fails_ends_with_one_red_line(
    loaded_shell: InteractiveShell, fake_provider: FakeProviderServer
) -> None:
    fake_provider.push(Fault("status", status=401, message="invalid api key"))
    result = loaded_shell.run_cell(
        f"%%agent --model fake:m@{fake_provider.base_url} --tools none\nhello\n"
    )
    error = result.error_in_exec
    assert error is not None
    assert type(error).__name__ == "AgentFailed"
    lines = error._render_traceback_()  # type: ignore[attr-defined]
    assert len(lines) == 1
    assert f"POST {fake_provider.base_url}" in lines[0]
    assert "check the API key" in lines[0]
