"""Time to capture and prepare text built to make regular expressions backtrack: long runs of
one character or pair (a line of dashes, a pasted blob, minified code), each as a 200,000-character
tool output, then a 50,000-character user message and 20,000 characters of tool-call arguments.

Every value pattern that scans a run and then needs a later character (``name@``, ``part/``,
``scheme://``, ``name(``) is bounded, so each start inside a run scans a bounded stretch: the
work is linear in the text. Prints seconds per case; the results are in docs/benchmarks.md.

    uv run --all-packages python benchmarks/adversarial_text.py
"""

from __future__ import annotations

import time

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope

CASES = {
    "a-run": "a" * 200_000, "slash-run": "/" * 200_000, "dash-run": "-" * 200_000, "a.-run": "a." * 100_000,
    "a_run": "a_" * 100_000, "paren": "(" * 100_000, "bracket": "[" * 100_000, "brace": "{" * 100_000,
    "digits": "1" * 200_000, "digit-dots": "1." * 100_000, "path-like": "a/" * 100_000, "email-like": "a@" * 100_000,
    "spaces": " " * 200_000, "colons": "a:" * 100_000, "quotes": '"' * 200_000, "backticks": "`a" * 100_000,
    "url-like": "http://" + "a" * 200_000, "hex": "0123456789abcdef" * 12_500, "camel": "aA" * 100_000,
    "dotted": "a.b" * 60_000,
}


def main() -> None:
    engine = ContextEngine(ContextConfig())
    engine.prepare([SystemMessage("s"), HumanMessage("hi")], scope=Scope(session_id="warm"))  # loads the embedding
    for name, text in CASES.items():
        scope = Scope(session_id=name)
        started = time.perf_counter()
        captured = engine.capture_tool_result(ToolMessage(content=text, tool_call_id="c1", name="bash"), scope)
        capture_s = time.perf_counter() - started
        call = AIMessage(content="", tool_calls=[{"name": "bash", "args": {"cmd": text[:20_000]}, "id": "c1"}])
        started = time.perf_counter()
        engine.prepare([SystemMessage("s"), HumanMessage(text[:50_000]), call, captured], scope=scope)
        print(f"{name:12s} capture {capture_s:6.2f} s   prepare {time.perf_counter() - started:6.2f} s", flush=True)


if __name__ == "__main__":
    main()
