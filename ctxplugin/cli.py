"""The ``ctxplugin`` command: ``replay`` recorded traces, ``inspect`` one prepared view,
``expand`` a stored original.

Exit codes: 0 when the command did its work (``replay``: at least one file was replayed; problems
with other files are printed to stderr); 1 when it could not (``replay``: every file failed, or
its ``--out`` or ``--chart`` file cannot be written, or ``--chart`` lacks matplotlib;
``inspect``/``expand``: bad input or an unknown ref); 2 for a usage error (bad option or
configuration).
"""

from __future__ import annotations

import json
import shlex
import sys
import tomllib
from pathlib import Path
from typing import IO, Annotated, Any, NoReturn, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ctxplugin._untrusted import json_text, valid_unicode
from ctxplugin.config import ContextConfig
from ctxplugin.errors import CtxpluginError, InvalidInputError, RefNotFoundError
from ctxplugin.replay.loaders import FORMATS, Format, load_file
from ctxplugin.replay.peers import STRATEGIES, ClearToolUsesSettings, StrategyName

app = typer.Typer(
    name="ctxplugin",
    help="Measure and inspect what ctxplugin sends to the model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

FormatOption = Annotated[
    str, typer.Option("--format", "-f", help=f"input format: auto or one of {', '.join(FORMATS)}")
]
ToolsOption = Annotated[
    Path | None, typer.Option("--tools", help="JSON file with the recorded agent's tool schemas (OpenAI or Anthropic format)")
]
ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="ContextConfig as a JSON or TOML file")
]
BudgetOption = Annotated[float | None, typer.Option(show_default=False, help="that section's budget (tokens, or a share as --budget-total); unset: scaled with the total")]


class _Printable:
    """A text stream whose writes have lone surrogates (undecodable bytes a recording or a file
    name kept) replaced by U+FFFD: a UTF-8 stream's ``strict`` handler would refuse them, and
    the table or the message would be lost to a ``UnicodeEncodeError``."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    @classmethod
    def of(cls, stream: Any) -> IO[str]:
        return cast(IO[str], cls(stream))  # a stream as rich uses one: writes, the rest delegated

    def write(self, text: str) -> int:
        return int(self._stream.write(valid_unicode(text)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _stderr() -> Console:
    return Console(file=_Printable.of(sys.stderr), highlight=False)


def _stdout() -> Console:
    console = Console(file=_Printable.of(sys.stdout), highlight=False)
    # Piped output has no terminal width; keep tables on one line per row.
    return console if console.is_terminal else Console(file=_Printable.of(sys.stdout), highlight=False, width=160)


def _raw(text: str) -> bytes:
    """The UTF-8 bytes of ``text``; a lone surrogate a host made from an undecodable byte
    (``surrogateescape``) is that byte again, any other is kept as ``surrogatepass`` writes it."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _emit(text: str) -> None:
    """Write ``text`` to stdout as :func:`_raw` encodes it, whatever error handler stdout has (a
    UTF-8 locale's is ``strict``, which refuses the undecodable bytes a stored output may hold)."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    buffer.write(_raw(text))
    buffer.flush()


def _json(document: object) -> str:
    """``document`` as indented JSON (see :func:`~ctxplugin._untrusted.json_text`)."""
    return json_text(document, indent=2, sort_keys=True)


def _fail(message: str, code: int = 1) -> NoReturn:
    _stderr().print(f"[red]error:[/red] {escape(message)}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _format(value: str) -> Format | None:
    if value == "auto":
        return None
    if value not in FORMATS:
        raise typer.BadParameter(f"{value!r} is not one of auto, {', '.join(FORMATS)}", param_hint="--format")
    return next(f for f in FORMATS if f == value)


def build_config(path: Path | None, overrides: dict[str, Any]) -> ContextConfig:
    """A ContextConfig from a JSON/TOML file plus command-line overrides.

    ``overrides`` maps dotted field names (``budget.total``) to values; None values are ignored.

    Raises:
        typer.BadParameter: the file cannot be read or the configuration is invalid.
    """
    data: dict[str, Any] = {}
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not content
        except OSError as exc:
            raise typer.BadParameter(f"{path}: cannot be read ({exc.strerror or exc})", param_hint="--config") from exc
        except UnicodeDecodeError as exc:
            raise typer.BadParameter(f"{path}: not UTF-8 text (byte {exc.start})", param_hint="--config") from exc
        try:
            data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
            raise typer.BadParameter(f"{path}: {exc}", param_hint="--config") from exc
        except RecursionError as exc:  # the parsers recurse once per level of nesting
            raise typer.BadParameter(f"{path}: nested too deeply to be a configuration", param_hint="--config") from exc
        if not isinstance(data, dict):
            raise typer.BadParameter(f"{path}: expected an object of ContextConfig fields", param_hint="--config")
    for dotted, value in overrides.items():
        if value is None:
            continue
        target = data
        *parents, leaf = dotted.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    try:
        return ContextConfig(**data)
    except (ValueError, TypeError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--config / --budget-* / --model / --encoding") from exc


def _config(
    config: Path | None, budget_total: float | None, budget_header: float | None, budget_history: float | None,
    budget_facts: float | None, budget_summaries: float | None, model: str | None, encoding: str | None,
) -> ContextConfig:
    return build_config(
        config,
        {
            "budget.total": budget_total,
            "budget.header": budget_header,
            "budget.history": budget_history,
            "budget.facts": budget_facts,
            "budget.summaries": budget_summaries,
            "model": model,
            "encoding": encoding,
        },
    )


def _tools(path: Path | None) -> tuple[dict[str, Any], ...]:
    from ctxplugin.replay.runner import load_tools_file

    if path is None:
        return ()
    try:
        return load_tools_file(path)
    except InvalidInputError as exc:
        raise typer.BadParameter(str(exc), param_hint="--tools") from exc


def _strategies(value: str | None) -> tuple[StrategyName, ...]:
    if value is None:
        return STRATEGIES
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise typer.BadParameter(f"unknown {unknown}; choose from {', '.join(STRATEGIES)}", param_hint="--strategies")
    return tuple(n for n in STRATEGIES if n in names)


@app.command()
def replay(
    files: Annotated[list[Path], typer.Argument(help="recordings: files, or directories of *.json / *.jsonl / *.ndjson")],
    format: FormatOption = "auto",
    tools: ToolsOption = None,
    config: ConfigOption = None,
    budget_total: Annotated[float | None, typer.Option(help="total budget (tokens, or a share of budget.context_window from --config)")] = None,
    budget_header: BudgetOption = None,
    budget_history: BudgetOption = None,
    budget_facts: BudgetOption = None,
    budget_summaries: BudgetOption = None,
    model: Annotated[str | None, typer.Option(help="model name, to pick the tokenizer")] = None,
    encoding: Annotated[str | None, typer.Option(help="tiktoken encoding name")] = None,
    cache_discount: Annotated[float, typer.Option(help="price of a cached prompt token (1 = no discount)")] = 0.1,
    strategies: Annotated[str | None, typer.Option(help=f"comma-separated subset of {','.join(STRATEGIES)}")] = None,
    clear_trigger: Annotated[int | None, typer.Option(min=1, help="context_editing trigger in tokens (default: LangChain's)")] = None,
    clear_keep: Annotated[int | None, typer.Option(min=0, help="context_editing tool results kept (default: LangChain's)")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print JSON instead of the table")] = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="print a Markdown table instead of the rich one")] = False,
    out: Annotated[Path | None, typer.Option("--out", dir_okay=False, help="also write the JSON to this file")] = None,
    chart: Annotated[
        Path | None, typer.Option("--chart", dir_okay=False, help="write a chart of tokens per call: PNG, or SVG/PDF by the name (needs ctxplugin\\[chart])")
    ] = None,
    chart_max: Annotated[int, typer.Option(min=1, help="most conversations drawn (the longest)")] = 6,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar or notes")] = False,
) -> None:
    """Replay recorded conversations call by call and compare what each strategy would send."""
    from ctxplugin.replay import render
    from ctxplugin.replay.runner import ReplaySettings
    from ctxplugin.replay.runner import replay as run_replay

    if json_output and markdown:
        raise typer.BadParameter("choose one of --json and --markdown")
    fmt = _format(format)
    try:
        settings = ReplaySettings(
            config=_config(config, budget_total, budget_header, budget_history, budget_facts, budget_summaries, model, encoding),
            tools=_tools(tools),
            cache_discount=cache_discount,
            clear_tool_uses=ClearToolUsesSettings(trigger=clear_trigger, keep=clear_keep),
            strategies=_strategies(strategies),
        )
        _ = settings.budget_total  # shares of a context window fail here, before any work
    except CtxpluginError as exc:
        raise typer.BadParameter(str(exc)) from exc
    err = _stderr()
    progress = Progress(
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("calls"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=quiet or not err.is_terminal,  # a log file would keep only a blank line of it
    )
    with progress:
        task = progress.add_task("replay", total=None)
        result = run_replay(
            files,
            settings,
            format=fmt or "auto",
            on_loaded=lambda total: progress.update(task, total=total),
            on_call=lambda: progress.advance(task),
        )
    for line in render.errors(result.files):
        err.print(f"[red]error:[/red] {escape(line)}", markup=True, highlight=False, soft_wrap=True)
    document = result.to_json()
    unwritten: list[str] = []  # reported after the results, which are printed all the same
    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(_json(document) + "\n", encoding="utf-8")
        except OSError as exc:
            unwritten.append(f"--out {out}: cannot be written ({exc.strerror or exc})")
    replayed = any(f.conversations for f in result.files)
    if chart is not None and replayed:
        from ctxplugin.replay.chart import write_chart

        try:
            write_chart(result, chart, limit=chart_max)
        except CtxpluginError as exc:  # matplotlib missing: the table is still worth printing
            unwritten.append(str(exc))
        except OSError as exc:
            unwritten.append(f"--chart {chart}: cannot be written ({exc.strerror or exc})")
    if json_output:
        _emit(_json(document) + "\n")
    elif markdown:
        sys.stdout.write(render.markdown_table(result))
    elif replayed:
        console = _stdout()
        for table in render.rich_tables(result):
            console.print(table)
    if not quiet and replayed and not json_output:
        for line in [render.LEGEND, *render.notes(result)]:
            err.print(line, markup=False, highlight=False, soft_wrap=True)
    if not replayed:
        _fail("no file could be replayed" if result.files else "no input files given")
    if unwritten:
        _fail("; ".join(unwritten))


@app.command()
def inspect(
    file: Annotated[Path, typer.Argument(help="a recording")],
    call: Annotated[int, typer.Option("--call", "-n", help="0-based call index (-1 = last)")] = 0,
    conversation: Annotated[str | None, typer.Option("--conversation", "-c", help="conversation id or 0-based index (default: the first)")] = None,
    format: FormatOption = "auto",
    tools: ToolsOption = None,
    config: ConfigOption = None,
    budget_total: Annotated[float | None, typer.Option(help="total budget (tokens, or a share of budget.context_window from --config)")] = None,
    model: Annotated[str | None, typer.Option(help="model name, to pick the tokenizer")] = None,
    encoding: Annotated[str | None, typer.Option(help="tiktoken encoding name")] = None,
    path: Annotated[Path | None, typer.Option("--path", help="embedded store directory to keep refs in (for `expand`); in memory when omitted")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    full: Annotated[bool, typer.Option("--full", help="show whole message texts")] = False,
) -> None:
    """Show the view ctxplugin prepares for one call of a recording."""
    from ctxplugin.engine import ContextEngine
    from ctxplugin.replay.inspection import inspect_call, render, select
    from ctxplugin.replay.runner import memory_engine_factory

    cfg = _config(config, budget_total, None, None, None, None, model, encoding)
    try:
        cfg.budget.resolve(model=cfg.model)  # a share of no window is a usage error, as for replay
    except CtxpluginError as exc:
        raise typer.BadParameter(str(exc)) from exc
    schemas = list(_tools(tools))
    fmt = _format(format)
    try:
        loaded = load_file(file, fmt or "auto")
        conv = select(loaded, conversation)
        engine = ContextEngine.embedded(path, config=cfg) if path is not None else memory_engine_factory(cfg)
        item = inspect_call(loaded, conv, call, engine=engine, tools=schemas)
    except CtxpluginError as exc:
        _fail(str(exc))
    if json_output:
        _emit(_json(item.to_json()) + "\n")
        return
    _stdout().print(render(item, full=full))
    if path is not None:
        refs = item.report.refs_used
        hint = (
            f"refs stored under {path}; read one with: ctxplugin expand {refs[0]} --path {shlex.quote(str(path))} "
            f"--session {shlex.quote(item.conversation)}"
            if refs
            else "this view names no ref to read with expand: its tool outputs fit whole, or the notes that condense them name none"
        )
        _stderr().print(hint, markup=False, soft_wrap=True)


@app.command()
def expand(
    ref: Annotated[str, typer.Argument(help="a ref, e.g. ref:bash:0123abcd4567ef89")],
    path: Annotated[Path, typer.Option("--path", help="embedded store directory")] = Path(".ctxplugin"),
    session: Annotated[str, typer.Option("--session", "-s", help="session id the ref was stored from")] = "default",
    user: Annotated[str | None, typer.Option(help="user id of the scope")] = None,
    workspace: Annotated[str | None, typer.Option(help="workspace id of the scope")] = None,
    tenant: Annotated[str | None, typer.Option(help="tenant id of the scope")] = None,
    fields: Annotated[
        list[str] | None,
        typer.Option("--fields", "--field", help="JSON path to select, e.g. 'items[*].id' (repeat for several)"),
    ] = None,
    pattern: Annotated[str | None, typer.Option(help="keep only lines or items that contain this text (any case)")] = None,
    regex: Annotated[bool, typer.Option("--regex", help="read --pattern as a regular expression")] = False,
    offset: Annotated[int, typer.Option(min=0, help="first JSON array item or line (of the matches, with --pattern)")] = 0,
    limit: Annotated[int | None, typer.Option(min=0, help="how many items or lines (0: all)")] = None,
) -> None:
    """Print a ref's stored output from an embedded store, whole or the part the options select.

    --fields, --pattern and --offset/--limit are the options of the model's expand_ref tool. Items of
    a JSON array are the units of --offset/--limit; otherwise lines, and a JSON object on one line
    is paged by the lines of its indented form."""
    from ctxplugin.cas._expand_note import expand_noting
    from ctxplugin.cas.sqlite import SQLiteCASStore
    from ctxplugin.scope import Scope

    if not path.is_dir():
        _fail(f"no store at {path} (pass --path, the directory given to ContextEngine.embedded)")
    try:
        # the CAS file of ContextEngine.embedded(path); reading a ref needs nothing else
        store = SQLiteCASStore(path / "cas.sqlite3")
        try:
            scope = Scope(session_id=session, user_id=user, workspace_id=workspace, tenant_id=tenant)
            text, note = expand_noting(
                store, ref, scope, fields=fields, offset=offset, limit=limit, pattern=pattern, regex=regex
            )
        finally:
            store.close()
    except CtxpluginError as exc:  # a ref not found is most often read from the wrong scope
        _fail((str(exc) if ref in str(exc) else f"{ref}: {exc}") + (f"; read as session {session!r}: pass --session, the thread id it was stored under (and --user, --workspace, --tenant as the run had them)" if isinstance(exc, RefNotFoundError) else ""))
    if text:  # a selection of nothing leaves stdout empty; the note below says why
        _emit(text if text.endswith("\n") else text + "\n")
    if note:
        _stderr().print(f"{ref}: {note}", markup=False, highlight=False, soft_wrap=True)


def main() -> None:
    """Entry point of the ``ctxplugin`` console script."""
    app()


if __name__ == "__main__":
    main()
