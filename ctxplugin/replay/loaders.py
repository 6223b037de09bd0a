"""Read recorded conversations from the formats agents and tracers write.

Supported formats (detected from the content; ``format=`` overrides):

- ``openai``: chat-format messages (``{"role", "content", "tool_calls"}``), as a JSON list, a
  ``{"messages": [...]}`` object, a list of those, or JSONL (one message, or one conversation,
  per line); Chat Completions or Responses API request bodies, one per call, that continue one
  another form one conversation;
- ``anthropic``: Anthropic Messages API request bodies (``system``, ``messages``, ``tools``), one
  per call or only the last, optionally with the responses; requests that continue one another
  form one conversation;
- ``langchain``: LangChain message dumps (``messages_to_dict`` or ``dumpd`` output), in the
  same containers, and LangGraph thread states, histories and checkpoints;
- ``langsmith``: LangSmith run exports (runs with ``inputs.messages`` and ``outputs``); the runs of
  one trace form one conversation, read from the run that saw the longest history;
- ``swe``: mini-swe-agent ``.traj.json`` files;
- ``tau``: tau-bench trajectory lists (``[{task_id, trial, reward, info, traj}, ...]``).

A file that cannot be read raises :class:`~ctxplugin.errors.InvalidInputError` naming the file;
a conversation inside it that is broken (tool calls and results that do not pair up) is reported
in :attr:`LoadedFile.errors` and the others still load.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ctxplugin._untrusted import MAX_JSON_DEPTH, json_depth_exceeds
from ctxplugin.errors import InvalidInputError
from ctxplugin.replay import _anthropic, _chat_logs, _responses
from ctxplugin.replay._conversation import Conversation, ExpectedAction, RecordedUsage
from ctxplugin.replay._formats import FORMATS, PARSERS, SWE_BASH_TOOL, Builder, Format, detect
from ctxplugin.replay._messages import pairing_problem

SUFFIXES = (".json", ".jsonl", ".ndjson")
"""What a directory is searched for, in any case (``.JSON`` too)."""


@dataclass
class LoadedFile:
    """The conversations of one file and the problems met reading it."""

    path: str
    format: Format
    conversations: list[Conversation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def discover(paths: Iterable[str | Path]) -> tuple[list[str], list[tuple[str, str]]]:
    """Files to replay (directories are searched for ``*.json``/``*.jsonl``/``*.ndjson`` in any case, sorted), and
    ``(path, problem)`` for paths that do not exist or hold no such file."""
    found: list[str] = []
    missing: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
            if not files:
                missing.append((str(raw), "directory holds no .json, .jsonl or .ndjson file"))
            found.extend(p.as_posix() for p in files)
        elif path.is_file():
            found.append(path.as_posix())
        else:
            missing.append((str(raw), "no such file or directory"))
    return list(dict.fromkeys(found)), missing


def load_file(path: str | Path, format: Format | Literal["auto"] = "auto") -> LoadedFile:
    """Read one recording.

    Raises:
        InvalidInputError: the file is unreadable, not JSON (e.g. truncated), or in no known
            format; the message names the file. A JSONL line that is not JSON (a file cut in
            the middle of its last line) is left out and listed in ``errors``; the other lines
            are read.
    """
    name = Path(path).as_posix()
    try:
        data = _read_json(Path(path))
        fmt = detect(data) if format == "auto" else format
        loaded = LoadedFile(path=name, format=fmt)
        loaded.errors.extend(getattr(data, "skipped", ()))
        for conv_id, build in PARSERS[fmt](data, Path(path).stem):
            try:
                conversation = build()
            except InvalidInputError as exc:
                loaded.errors.append(f"conversation {conv_id}: {exc}")
                continue
            problem = pairing_problem(conversation.messages)
            if problem:
                loaded.errors.append(f"conversation {conv_id}: {problem}")
                continue
            if not conversation.call_indexes():
                loaded.errors.append(f"conversation {conv_id}: no assistant message to replay")
                continue
            loaded.conversations.append(conversation)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{name}: {exc}") from exc
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot be read ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{name}: not UTF-8 text (byte {exc.start}); recordings are JSON or JSONL") from exc
    return loaded


def _read_json(path: Path) -> Any:
    text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not content
    if not text.strip():
        raise InvalidInputError("the file is empty")
    if json_depth_exceeds(text):  # the parser recurses once per level: refused before it runs
        raise InvalidInputError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels: not a recording")
    try:
        return json.loads(text)
    except json.JSONDecodeError as whole:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2:
            raise _json_error(whole, text) from whole
        items = _Lines()
        cut = False  # the first line was cut: responses to the requests it held follow it
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line.removeprefix("\ufeff"))  # the mark of a file joined to the one before
                if cut and not items and _is_response(item):
                    items.skipped.append(f"line {number} is a response to a request on the cut first line, left out")
                    continue
                items.append(item)
            except json.JSONDecodeError as exc:
                cut = number == 1
                if number == 1 and not _cut_at_start(line, lines[1]):  # not JSONL either: the whole document's error
                    raise _json_error(whole, text) from whole
                # the other lines still hold their conversations: the line is reported, not the file
                last = not any(rest.strip() for rest in text.splitlines()[number:])
                hint = "; the file looks truncated" if last else "; the file looks cut at its start" if number == 1 else ""
                items.skipped.append(f"line {number} is not valid JSON ({exc.msg}), left out{hint}")
        return items


def _is_response(item: Any) -> bool:
    return _chat_logs.is_completion(item) or _responses.is_response(item) or _anthropic.is_response(item)


def _cut_at_start(first: str, second: str) -> bool:
    """Whether a first line that is not JSON is the tail of a JSONL line (a log read from the
    middle, as ``tail -c`` gives it): the next line is a whole object or array. A JSON document's
    opening bracket, alone on its line, is no cut line."""
    if first.strip() in ("[", "{"):
        return False
    try:
        return isinstance(json.loads(second), (dict, list))
    except json.JSONDecodeError:
        return False


class _Lines(list[Any]):
    """Items of a JSONL file (each line one JSON value), and the lines left out as not JSON."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped: list[str] = []


def _json_error(exc: json.JSONDecodeError, text: str) -> InvalidInputError:
    truncated = exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string")
    hint = "; the file looks truncated" if truncated else ""
    return InvalidInputError(f"not valid JSON ({exc.msg}, line {exc.lineno}, column {exc.colno}){hint}")



__all__ = [
    "FORMATS",
    "SUFFIXES",
    "SWE_BASH_TOOL",
    "Builder",
    "Conversation",
    "ExpectedAction",
    "Format",
    "LoadedFile",
    "RecordedUsage",
    "detect",
    "discover",
    "load_file",
]
