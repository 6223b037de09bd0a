"""A chat whose assistant ends its replies with a shell command is a chat: what the person
answers is what they said, never a command's output, while a text-mode agent's outputs (tagged,
led as an observation, or plain text no person wrote) are still read as outputs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin._layout import synthetic_kind
from ctxplugin.stages.text_mode import command_outputs
from ctxplugin.testing import logical_clock, memory_engine
from ctxplugin.tokens import content_text


@pytest.fixture(autouse=True)
def _defaults(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("CTXPLUGIN_MODE", raising=False)  # what a user gets from ContextConfig()
    yield


HELPER = SystemMessage(content="You are a helpful assistant.")
TASK = HumanMessage(content="Fix the bug in src/parser.py: parse_line drops the last field.")
VERSION = AIMessage(
    content="Now check the version:\n\n```bash\npython -c 'import requests; print(requests.__version__)'\n```"
)


def suggests(command: str) -> AIMessage:
    return AIMessage(content=f"Try this:\n\n```bash\n{command}\n```")


def run(step: int) -> AIMessage:
    return AIMessage(content=f"THOUGHT: step {step}.\n\n```bash\nls dir_{step}\n```")


def install_chat() -> list[BaseMessage]:
    """A person asking a coding helper, which ends every reply with a command to run."""
    messages: list[BaseMessage] = [
        HELPER,
        HumanMessage(
            content="How do I install requests? My project id is PRJ-88231 and my budget is 700 EUR."
        ),
        AIMessage(content="Use pip:\n\n```bash\npip install requests\n```"),
        HumanMessage(content="I get 'permission denied'. Also, my budget is now 900 EUR, not 700."),
        AIMessage(content="Try a user install:\n\n```bash\npip install --user requests\n```"),
        HumanMessage(
            content="That worked! What next? " + "Here is my long log line with details. " * 400
        ),
    ]
    for i in range(6):
        messages += [
            VERSION,
            HumanMessage(
                content=f"It printed 2.{i}.0. Then what? "
                + "more text about what I saw on the screen. " * 300
            ),
        ]
    return messages


def test_a_persons_correction_in_a_chat_whose_replies_end_with_commands_stays_theirs() -> None:
    engine = memory_engine(ContextConfig(), clock=logical_clock())
    scope = Scope(session_id="install-chat")
    conversation = install_chat()
    assert command_outputs(conversation) == []
    prepared = engine.prepare(conversation, scope=scope)
    sent = [content_text(m.content) for m in prepared.messages]
    assert not any("overruled" in text for text in sent)
    assert any("900 EUR" in text for text in sent)  # the correction is shown, as what the user said
    said = [
        m for m in prepared.messages if isinstance(m, HumanMessage) and synthetic_kind(m) is None
    ]
    assert said and not any(
        content_text(m.content).startswith("[ref:") for m in said
    )  # a ref the model cannot expand
    assert not any("From tool outputs" in text for text in sent)
    budget = engine.facts.current("my_budget", scope=scope)
    assert budget is not None and "900" in budget.text and budget.authority == "user"
    assert any("700" in old.text for old, _ in engine.facts.superseded(scope=scope))


def test_call_by_call_a_chat_whose_replies_end_with_commands_is_never_read_in_text_mode() -> None:
    engine = memory_engine(ContextConfig(), clock=logical_clock())
    scope = Scope(session_id="install-chat-by-call")
    conversation = install_chat()
    for end in range(2, len(conversation) + 1, 2):  # the host sends each new question
        prepared = engine.prepare(conversation[:end], scope=scope)
        assert not any(
            "overruled" in content_text(m.content) or "[ref:command" in content_text(m.content)
            for m in prepared.messages
        )
    budget = engine.facts.current("my_budget", scope=scope)
    assert budget is not None and "900" in budget.text and budget.authority == "user"


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "<string>", line 1, in <module>\n'
    "ModuleNotFoundError: No module named 'requests'\n"
)


@pytest.mark.parametrize(
    "answers",
    [
        pytest.param(
            [TRACEBACK + "\nWhat does this mean?", TRACEBACK + "\nstill the same, any idea?"],
            id="pasted-traceback-and-a-question",
        ),
        pytest.param(
            ["ok done, it printed 2.0.0", "ok done, it printed 2.0.0 again"], id="ok-done"
        ),
        pytest.param(["Thanks, that installed it.", "Great, it runs now"], id="thanks"),
        pytest.param(["i get permission denied", "same error"], id="lowercase-first-person"),
        pytest.param(
            ["```\n" + TRACEBACK + "```\nwhy does it fail?", "```\n2.0.0\n```"],
            id="pasted-in-a-fence-then-a-question",
        ),
        pytest.param(["a.py b.py", "ok, and?"], id="a-person-later"),
        pytest.param(
            [
                "```\nparser\n======\n\nInstall\n-------\n\npip install parser\n```\n"
                "The README says this, but where do I call it?",
                "ok",
            ],
            id="a-pasted-readme-and-a-question",
        ),
        pytest.param(
            ["update: my budget is now 900 EUR", "note: we moved the server"],
            id="a-label-of-theirs",
        ),
        pytest.param(
            ["ich habe es ausgeführt, aber es kommt ein Fehler", "j'ai lancé la commande, rien"],
            id="german-french",
        ),
        pytest.param(["¿y ahora qué hago?", "我运行了，但是报错了"], id="spanish-chinese"),
    ],
)
def test_a_persons_replies_to_suggested_commands_are_what_they_said(answers: list[str]) -> None:
    conversation: list[BaseMessage] = [
        HELPER,
        HumanMessage(content="My script cannot import requests."),
    ]
    for step, answer in enumerate(answers):
        conversation += [
            suggests(f"pip install requests=={step + 1}.0"),
            HumanMessage(content=answer),
        ]
    assert command_outputs(conversation) == []
    assert command_outputs([*conversation, suggests("pip list")]) == []


def test_a_conversation_a_person_answers_once_is_a_chat_from_its_start() -> None:
    plain = [HumanMessage(content=f"dir_{step}/a.py dir_{step}/b.py") for step in range(3)]
    agent: list[BaseMessage] = [HELPER, TASK, run(0), plain[0], run(1), plain[1], run(2), plain[2]]
    assert command_outputs(agent) == [3, 5, 7]
    interjected = [
        *agent,
        run(3),
        HumanMessage(content="Please stop, I need the disk for something else."),
    ]
    assert command_outputs(interjected) == []
    assert command_outputs([*interjected, run(4), plain[0]]) == []


@pytest.mark.parametrize(
    "text",
    [
        "<returncode>0</returncode>\n<output>\nDo you want to continue? [Y/n] I think so\n</output>",
        "Observation: I found 3 files. Which one?",
        "OBSERVATION:\nThanks for using the tool! What next?",
        "EXECUTION RESULT of [ls]:\nmy_notes.txt\nWhy?",
    ],
)
def test_an_output_in_a_form_agents_tag_it_with_is_an_output_whatever_it_says(text: str) -> None:
    answer = HumanMessage(content=text)
    assert command_outputs([HELPER, TASK, run(0), answer]) == [
        3
    ]  # read at once, as mini-swe-agent's tags are
    assert command_outputs(
        [HELPER, TASK, run(0), answer, run(1), HumanMessage(content="a.py")]
    ) == [3, 5]


@pytest.mark.parametrize(
    "text",
    [
        "On branch main\nYour branch is up to date with 'origin/main'.\n\nnothing to commit, working tree clean",
        "============ test session starts ============\ncollected 3 items\n\ntests/test_a.py ...   [100%]\n\n============ 3 passed in 0.02s ============",
        "    for i in range(10):\n        print(i)  # we print each one",
        "(no output)",
        "cat: missing.txt: No such file or directory",
        "Successfully installed requests-2.31.0",
        "Deploy region: eu-west-1",
        "src/parser.py:41:    # I think we should drop the last field here",
        "./README.md:3:We recommend installing it with pip.",
        "a3f2c91 Fix the crash I introduced in parse_line\n9b7e2d0 Add tests",
        "After this operation, 2,048 kB will be used.\nDo you want to continue? [Y/n] Abort.",
        "Are you sure you want to delete my_notes.txt? [y/N]",
        "Proceed (y/n)?",
        "# parser\n\nA small library to parse lines.\n\n## Install\n\n```bash\npip install parser\n```\n\n"
        "## Usage\n\nCall parse_line on each line.\n\n## Contributing\n\nWe welcome pull requests. Thanks!",
        "Is equal? True",
        "Hello, world!\nHey, Jo!",
        "Input: 'abc'\nOutput: 'ABC'\nMatch? False\nFixed? no",
        "Does the bug reproduce? 3 of 5 cases",
        "Contributing\n============\n\nThanks for your interest in contributing!\n\nSetup\n-----\n\n"
        "Run the tests with tox.\n\nStyle\n-----\n\nWe use black.",
    ],
)
def test_an_untagged_agents_plain_outputs_are_still_outputs(text: str) -> None:
    answer = HumanMessage(content=text)
    assert command_outputs([HELPER, TASK, run(0), answer, run(1), answer]) == [3, 5]
