"""What ``--help`` says of the ``ctxplugin`` command's options: every option it names exists,
and no part of a help text is lost to rich's markup."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from ctxplugin.cli import app


def help_text(command: str) -> str:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "400", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())


def option_names(command: str) -> set[str]:
    found = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return {"--help", *(name for param in found.params for name in (*param.opts, *param.secondary_opts))}


@pytest.mark.parametrize("command", ["replay", "inspect", "expand"])
def test_every_option_a_help_text_names_exists(command: str) -> None:
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", help_text(command)))
    assert named - option_names(command) == set()


def test_chart_help_names_the_extra_it_needs() -> None:
    assert "ctxplugin[chart]" in help_text("replay")


@pytest.mark.parametrize("command", ["replay", "inspect"])
def test_tools_help_names_both_formats_the_file_may_hold(command: str) -> None:
    assert re.search(r"OpenAI or Anthropic", help_text(command))


def test_the_command_list_gives_each_command_one_line() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "400", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    panel = result.stdout.split("Commands")[1]
    rows = [line.strip("│ ") for line in panel.splitlines()[1:] if line.startswith("│")]
    assert [row.split()[0] for row in rows] == ["replay", "inspect", "expand"]


@pytest.mark.parametrize("command", ["replay", "inspect", "expand"])
def test_every_option_says_what_it_does(command: str) -> None:
    found = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    assert [param.name for param in found.params if not getattr(param, "help", None)] == []
