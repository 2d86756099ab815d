"""How long ``%load_ext mibyan_jupyter`` takes in a fresh kernel, next to
``%load_ext jupyter_ai_magics`` when that is installed (the bench environment has it).

Each load runs in a fresh kernel started by jupyter_client, so nothing is cached in the
process; the figure is the wall time of the ``%load_ext`` line measured inside the kernel
(``time.perf_counter`` around ``run_line_magic``), best of ``RUNS``. The issue's goal: ours
<= 0.2x jupyter-ai's (which imports langchain at load).

Last line: one JSON object with ``load_ext_s``, ``jupyter_ai_load_ext_s`` and
``ratio_vs_jupyter_ai`` (``null`` when jupyter_ai_magics is not installed).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

from jupyter_client.manager import start_new_kernel

RUNS = 3
CODE = """
import time as _t
_s = _t.perf_counter()
get_ipython().run_line_magic("load_ext", {module!r})
print("LOAD_S", _t.perf_counter() - _s)
import sys as _sys
print("MODULES", len(_sys.modules), "pydantic" in _sys.modules, "httpx" in _sys.modules)
"""


def load_time(module: str) -> tuple[float, str]:
    """Seconds for ``%load_ext module`` in a fresh kernel, and what else it reported."""
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        reply = client.execute_interactive(
            CODE.format(module=module), timeout=120, output_hook=_collect
        )
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"%load_ext {module} failed: {reply['content']}")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    lines = "".join(_collected).splitlines()
    seconds = next(float(x.split()[1]) for x in lines if x.startswith("LOAD_S"))
    extra = next((x for x in lines if x.startswith("MODULES")), "")
    return seconds, extra


_collected: list[str] = []


def _collect(message: dict[str, Any]) -> None:
    if message["msg_type"] == "stream":
        _collected.append(message["content"]["text"])


def best(module: str) -> tuple[float, str]:
    results = []
    for _ in range(RUNS):
        _collected.clear()
        results.append(load_time(module))
    return min(results)


def main() -> None:
    ours, ours_extra = best("mibyan_jupyter")
    print(f"%load_ext mibyan_jupyter     {ours * 1000:8.1f} ms   ({ours_extra})")
    theirs: float | None = None
    if importlib.util.find_spec("jupyter_ai_magics") is not None:
        theirs, theirs_extra = best("jupyter_ai_magics")
        print(f"%load_ext jupyter_ai_magics  {theirs * 1000:8.1f} ms   ({theirs_extra})")
    else:
        print("jupyter_ai_magics is not installed here: no peer figure", file=sys.stderr)
    ratio = ours / theirs if theirs else None
    if ratio is not None:
        print(f"ratio ours / jupyter-ai: {ratio:.3f} (goal <= 0.2)")
    print(
        json.dumps(
            {
                "load_ext_s": round(ours, 4),
                "jupyter_ai_load_ext_s": None if theirs is None else round(theirs, 4),
                "ratio_vs_jupyter_ai": None if ratio is None else round(ratio, 4),
            }
        )
    )


if __name__ == "__main__":
    main()
