"""Source code a tool printed (``sed -n``, ``grep``, ``cat`` of a file, under a shell's
``<returncode>`` envelope, so the output's shape reads as text or log) is read without keys: lines
such as ``ret = self`` or ``recurse: bool = True,`` would otherwise be keyed and replace one
another, marking a later output that quotes the same code as outdated. Files listed under one
label (git's ``modified:`` lines) are a list, not one value moving on."""

from __future__ import annotations

import pytest

from ctxplugin.facts import RuleExtractor

ENVELOPE = "<returncode>0</returncode>\n<output>\n{}\n</output>"

CODE_OUTPUTS = [
    # a property's body: two assignments of one name
    '    @property\n    def root(self):\n        """Reference to the `Schema` that this field belongs to even if it is buried in a\n'
    "        container field (e.g. `List`).\n        Return `None` for unbound fields.\n        \"\"\"\n        ret = self\n"
    '        while hasattr(ret, "parent"):\n            ret = ret.parent\n        return ret if isinstance(ret, SchemaABC) else None',
    # a signature's annotated parameters and a call's keyword arguments
    "    def _parse_tokens(\n        tokens: Sequence[BaseSegment],\n        config: FluffConfig,\n"
    "        recurse: bool = True,\n    ):\n        parsed = parser.parse(\n            tokens, recurse=recurse, fname=fname\n        )",
    # grep's "path: line" hits and an argument line
    "./src/rules/L004.py:                anchor=context.segment, fixes=fixes, description=description\n"
    "                            anchor=ref,",
    # grep's hits across files: one name's argument in each
    "./src/rules/L019.py:        description=\"Found leading comma. Expected only trailing.\",\n"
    "./src/rules/L019.py:        description=\"Found trailing comma. Expected only leading.\",\n"
    "./src/rules/L003.py:12:    description=\"First line has unexpected indent\",",
    # a fallback assignment and a docstring's literal-block marker
    "        except TypeError:\n            modname = None\n        if modname is None:\n"
    "            modname = builtins.__name__\n        Example: ::",
]


@pytest.mark.parametrize("code", CODE_OUTPUTS)
def test_code_a_tool_printed_is_read_without_a_key(code: str) -> None:
    drafts = RuleExtractor().from_tool(ENVELOPE.format(code), "bash")
    assert [d.text for d in drafts if d.key] == []


def test_values_a_script_printed_are_still_read() -> None:
    printed = ENVELOPE.format("pn = SomeName\nstatus = ready\nFor char in pn: works\nModified files: 2")
    keys = [d.key for d in RuleExtractor().from_tool(printed, "bash") if d.key]
    assert keys == ["pn", "status", "char_pn", "modified_files"]


def test_files_listed_under_one_label_do_not_replace_one_another() -> None:
    status = ENVELOPE.format(
        "On branch main\nChanges not staged for commit:\n\tmodified:   src/sqlfluff/rules/L031.py\n"
        "\tmodified:   test/cli/commands_test.py\n"
    )
    drafts = [d for d in RuleExtractor().from_tool(status, "bash") if "modified" in d.text]
    assert [d.key for d in drafts] == [None, None]
    # one value moving on, line after line, still replaces
    progress = "Build of wheel: started\nBuild of wheel: finished with status 'done'"
    assert [d.key for d in RuleExtractor().from_tool(progress, "bash")] == ["build_wheel", "build_wheel"]



@pytest.mark.parametrize(
    ("printed", "key"),
    [
        ("Order 7731 updated: status=shipped", "order_updated_7731"),
        ("state=running", "state"),
        ("log_level=info", "log_level"),
    ],
)
def test_a_name_given_a_word_a_tool_printed_keeps_its_key(printed: str, key: str) -> None:
    # a CLI's or a .env file's "name=value" is no keyword argument: a later run's value replaces it
    drafts = RuleExtractor().from_tool(ENVELOPE.format(printed), "bash")
    assert [d.key for d in drafts] == [key]


def test_settings_of_a_config_file_a_tool_printed_keep_their_keys() -> None:
    # "cat config.ini": at the start of a line, a name given a constant or a host is a setting
    config = ENVELOPE.format("[server]\ndebug = True\nhost = db.internal.example.com\nmode = fast")
    assert [d.key for d in RuleExtractor().from_tool(config, "bash")] == ["debug", "host", "mode"]
    # the same words indented quote a function's body
    body = ENVELOPE.format("    def setup(self):\n        debug = True\n        host = self.host")
    assert [d.key for d in RuleExtractor().from_tool(body, "bash") if d.key] == []
