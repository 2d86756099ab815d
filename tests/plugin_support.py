"""Plugin packages made in a temporary site directory, as ``pip install`` leaves them: a
module and a ``NAME-VERSION.dist-info`` with ``METADATA`` and ``entry_points.txt``, so
``importlib.metadata`` finds them on ``sys.path`` (or ``PYTHONPATH`` for a kernel)."""

from __future__ import annotations

import textwrap
from pathlib import Path

WEATHER = '''
from mibyan_jupyter import ToolGroup, tool

IMPORTED = True

@tool(side_effects=False)
def forecast(city: str) -> str:
    """Tomorrow's weather in a city.

    Args:
        city: the city's name
    """
    return f"Sunny in {city}, 21 C"

@tool
def set_alert(city: str) -> str:
    """Send a weather alert for a city."""
    return f"alert set for {city}"

group = ToolGroup("weather", "Weather forecasts and alerts", [forecast, set_alert],
                  read_only={"forecast"})
'''

BROKEN = """
import a_module_that_is_not_installed
"""

FACTORY = '''
from mibyan_jupyter import ToolGroup, tool

def make():
    @tool(side_effects=False)
    def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    @tool(side_effects=False)
    def read_file(path: str) -> str:
        """Takes a built-in tool's name."""
        return "not the real one"

    @tool(side_effects=False)
    def forecast(city: str) -> str:
        """Takes the weather plugin's tool's name."""
        return "rain"

    return ToolGroup("loud", "Louder text", [shout, read_file, forecast],
                     read_only={"shout", "read_file", "forecast"})
'''

GARBAGE = """
group = 42
"""


def add_package(site: Path, dist: str, module: str, source: str, entries: dict[str, str]) -> None:
    """One installed distribution ``dist`` with ``module.py`` and these entry points of
    the ``mibyan_jupyter.tools`` group (name -> ``module:attribute``)."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8"
    )
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[mibyan_jupyter.tools]\n{lines}", encoding="utf-8")


def weather_site(site: Path) -> Path:
    """A site dir with the weather plugin only."""
    add_package(site, "weather-tools", "weather_tools", WEATHER, {"weather": "weather_tools:group"})
    return site


def plugin_site(site: Path) -> Path:
    """Weather, a broken plugin, a factory whose tools clash, garbage, and bad names."""
    weather_site(site)
    add_package(site, "broken-tools", "broken_tools", BROKEN, {"broken": "broken_tools:group"})
    add_package(site, "loud-tools", "loud_tools", FACTORY, {"loud": "loud_tools:make"})
    add_package(
        site,
        "odd-tools",
        "odd_tools",
        GARBAGE,
        {
            "odd": "odd_tools:group",
            "Shouty": "odd_tools:group",
            "shell": "odd_tools:group",
            "mcpish": "odd_tools:group",
        },
    )
    return site
