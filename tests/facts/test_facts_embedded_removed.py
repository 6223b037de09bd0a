"""The embedded Chroma directory removed while an engine runs on it (a cleanup of the data
directory, a volume remounted): the engine opens the directory again at its path, claimed for
this process as before, instead of failing every step until the process restarts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from ctxplugin import ContextEngine, Scope
from ctxplugin._chroma import OWNER_FILE

S = Scope(session_id="removed")


def test_facts_stated_after_the_directory_was_removed_are_kept_on_disk(tmp_path: Path, say: Any) -> None:
    engine = ContextEngine.embedded(tmp_path)
    messages: list[BaseMessage] = [SystemMessage("You help with releases.")]
    try:
        assert say(engine, messages, "The deploy target is eu-west-3.", S) == []
        shutil.rmtree(tmp_path / "chroma")

        assert say(engine, messages, "The release deadline is Friday 5pm.", S) == []
        assert engine.facts.current("release_deadline", scope=S) is not None
        # what the removed directory held is gone with it
        assert engine.facts.current("deploy_target", scope=S) is None
    finally:
        engine.close()
    again = ContextEngine.embedded(tmp_path)
    try:
        assert again.facts.current("release_deadline", scope=S) is not None
    finally:
        again.close()


def test_the_directory_opened_again_is_claimed_for_this_process(tmp_path: Path, say: Any) -> None:
    engine = ContextEngine.embedded(tmp_path)
    messages: list[BaseMessage] = [SystemMessage("You help with releases.")]
    try:
        say(engine, messages, "The deploy target is eu-west-3.", S)
        shutil.rmtree(tmp_path / "chroma")
        say(engine, messages, "The release deadline is Friday 5pm.", S)

        owner = tmp_path / "chroma" / OWNER_FILE
        # what another process opening the directory does (see ctxplugin._chroma.claim_directory)
        lock = (
            "import fcntl, os, sys; os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True); "
            "fcntl.lockf(os.open(sys.argv[1], os.O_RDWR | os.O_CREAT), fcntl.LOCK_EX | fcntl.LOCK_NB)"
        )
        other = subprocess.run([sys.executable, "-c", lock, str(owner)], capture_output=True, text=True, timeout=30)
        assert other.returncode != 0, "another process could take the directory this engine writes to"
    finally:
        engine.close()
