"""Whether a user message answering a reply that ends with a command is a command's output in a
form agents give it, or what a person wrote.

A chat assistant that ends its replies with a command to run gets the person's answer as the next
user message, just as a text-mode agent gets its command's output (see
:mod:`ctxplugin.stages.text_mode`). Reading a person's words as an output would store them behind
a ref the model cannot expand and let an older value of theirs overrule their correction, so an
answer is read as what a person wrote wherever it reads so, and the conversation is then a chat
(see :func:`ctxplugin.stages._commands.command_outputs`). An answer is

- in an output's form (:func:`output_form`) when it opens with mini-swe-agent's
  ``<returncode>``/``<output>`` tags or an observation lead (``Observation:``, ``OBSERVATION:``,
  ``EXECUTION RESULT``): an output, whatever it says;
- a person's (:func:`written_by_person`) when, not in that form, a prose line of it (outside
  fenced blocks; of a long answer its first and last two lines, where a person writes around
  what they paste) has first-person words (I, my, we…; ich, wir, je, nous, yo, 我…), a question
  (``?``, ``？``, ``¿``; not a script's ``Is equal? True``), thanks, an acknowledgement opening
  it (``ok``, ``yeah``…) or says what a command did (``it printed``, ``that worked``…);
- else plain text, as most of what a command prints: an output once two commands ran. So is a
  document printed whole (markdown headings, a reStructuredText title), whatever its lines say.

A prose line starts with a letter (not indented, numbered, marked as code, a prompt, a comment or
a list), not with a program's label (``WARNING:``, ``cat:``, ``NameError:``; a person's
``update:``, ``note:``, ``btw:`` are no program's), a ``grep -n`` hit's path (``src/a.py:12:``)
or a commit's hash (``git log --oneline``), and holds nothing code does (``=``, braces, a
semicolon, a call) nor a program's ``[y/N]`` prompt. An output that still reads as a person's
makes the conversation a chat, which is sent as one: of the coding recordings' 562 outputs
without their tags, none does; a script's own printed words still may (``print("Testing my
fix")``).
"""

from __future__ import annotations

import re
from itertools import pairwise

from langchain_core.messages import BaseMessage

from ctxplugin._lru import PerMessage
from ctxplugin._text_shapes import detect_text_shape, grep_matches
from ctxplugin.facts._not_prose import FENCED
from ctxplugin.tokens import content_text

_FORM = re.compile(
    r"\A\s*(?:<(?:returncode|output)>|observation\s*:|execution result\b)", re.IGNORECASE
)
_PROSE_START = re.compile(r"[\"'‘“¿¡]?[^\W\d_]")  # a letter, perhaps quoted: no indent, digit, mark
_LABEL = re.compile(
    r"(?:[A-Z][A-Z_]+|[a-z][\w.\-]*|[A-Z]\w*(?:Error|Exception|Warning)):\s"
)  # WARNING:, cat:
_OWN_LABEL = re.compile(r"(?:update|edit|also|note|ps|p\.s\.|btw|fyi|correction):\s", re.IGNORECASE)
_HASH = re.compile(r"(?=[0-9a-f]*\d)[0-9a-f]{7,40}\s")  # git log --oneline
_PROMPT = re.compile(r"[\[(][yY]/[nN][\])]|[\[(][yY]es/[nN]o[\])]")  # Are you sure? [y/N]
_UNDERLINE = re.compile(r"([=\-~^*+#])\1{2,}")
_CODE = re.compile(r"[=;{}]|\w\(|->|::|</|/>")
_FIRST_PERSON = re.compile(
    r"(?<![\w'’./\-(\[])(?:i|i['’](?:m|ve|d|ll)|me|my|mine|myself|we|we['’](?:re|ve|ll|d)|our|ours"
    r"|ich|mein|meine[mnrs]?|wir|je|nous|yo|nosotros|meu|minha)(?![\w'’/\-)\]]|\.\w)"
    r"|(?<![\w'’./\-(\[])j['’](?=[^\W\d_])|我|私は|僕|저는|제가|나는",
    re.IGNORECASE,
)  # English, German, French, Spanish, Portuguese, Chinese, Japanese, Korean
_QUESTION = re.compile(
    r"[^\W\d_] ?\?(?:\s|$)(?![ \t]*(?:(?i:true|false|none|yes|no)\b|[\d'\"\[{(-]))|[^\W\d_] ?？|¿"
)  # a word then "?": "what next?", "ok, and?"; not a script's "Is equal? True", "Match? 3"
_THANKS = re.compile(r"\b(?:thanks|thank you|thx|cheers)\b", re.IGNORECASE)
_OPENER = re.compile(
    r"\A(?:(?:ok|okay|alright|yeah|yep|yup|nope|sure|hmm+|great|cool|awesome|perfect|nice)(?:[,!]|\s+[a-z])"
    r"|(?:yes|no|done)[,!])",
    re.IGNORECASE,
)
_SAYS_WHAT_IT_DID = re.compile(
    r"\b(?:it|that|this)\s+(?:printed|prints|says|said|shows|showed|returned|returns|gave|gives|worked|works|fixed it)\b"
    r"|\b(?:didn't|doesn't|did not|does not)\s+work\b|\bstill\s+(?:fails|failing|broken|the same)\b|\bsame error\b",
    re.IGNORECASE,
)
_EDGE = 200  # characters of a line read from each end: a pasted log line is read at its ends only
_ALL_LINES = 6  # an answer of this many lines or fewer is read whole

_READ: PerMessage[bool] = PerMessage(8192)


def output_form(message: BaseMessage) -> bool:
    """Whether ``message`` opens as agents' outputs do: mini-swe-agent's tags, an observation lead."""
    return _FORM.match(content_text(message.content)) is not None


def written_by_person(message: BaseMessage) -> bool:
    """Whether ``message``, a user message answering a reply that ends with a command and not
    in an output's form, reads as a person's (see the module docstring); read once per message."""
    found = _READ.get(message)
    if found is None:
        found = _by_person(content_text(message.content))
        _READ.put(message, found)
    return found


def _by_person(text: str) -> bool:
    if _FORM.match(text) or "backticks" in text.lower():  # mini-swe-agent's request for its format
        return False
    bare = FENCED.sub("\n", text)  # what a person pastes in a fenced block is not theirs
    lines = [line for line in bare.splitlines() if line.strip()]
    if len(lines) > _ALL_LINES:
        lines = lines[:2] + lines[-2:]
    return any(_reads_as_person(line) for line in lines) and not _document(bare)


def _document(text: str) -> bool:
    """Whether ``text`` (outside fenced blocks) is a document printed whole (a README, a
    changelog): markdown headings, or a reStructuredText title underlined (``Setup`` then
    ``-----``), which no person writes in a reply."""
    if detect_text_shape(text) == "markup":
        return True
    lines = text.splitlines()
    return any(
        len(under) >= len(title.rstrip()) >= 1
        and _PROSE_START.match(title) is not None
        and _UNDERLINE.fullmatch(under) is not None
        for title, under in pairwise(lines)
    )


def _reads_as_person(line: str) -> bool:
    if len(line) > 2 * _EDGE:
        line = f"{line[:_EDGE]}\n{line[-_EDGE:]}"
    if (
        not _PROSE_START.match(line) or _HASH.match(line) or grep_matches(line)[0]
    ):  # code, a list, grep's
        return False
    if _LABEL.match(line) and not _OWN_LABEL.match(line):  # a log or a program's message
        return False
    if _CODE.search(line) or _PROMPT.search(line):  # code, a program asking "[y/N]"
        return False
    if _OPENER.match(line):
        return True
    return any(
        pattern.search(line) for pattern in (_FIRST_PERSON, _QUESTION, _THANKS, _SAYS_WHAT_IT_DID)
    )


__all__ = ["output_form", "written_by_person"]
