"""The check of a captured output's annotation against the content its message holds now."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from ctxplugin import Scope
from ctxplugin._messages import META_KEY, annotation
from ctxplugin.cas import content_marks, scrubbed, withheld, without_lead, without_stale
from ctxplugin.testing import memory_engine

LOG = "\n".join(f"2026-01-02 payment PAY-{i:04d} charged card 4111-1111-1111-{i:04d}" for i in range(60))
MASKED = LOG.replace("4111-1111-1111-", "****-****-****-")


def kept_original(content: str | list[str | dict[str, Any]] = LOG) -> tuple[ToolMessage, ToolMessage]:
    """What capture_tool_result returned, and the original annotated with it (as a chat
    history keeps it)."""
    original = ToolMessage(content, tool_call_id="call_1", name="payments", id="t1")
    compact = memory_engine().capture_tool_result(original, scope=Scope(session_id="a"))
    assert annotation(compact).get("ref")
    return compact, original.model_copy(update={"additional_kwargs": {META_KEY: annotation(compact)}})


def test_the_compact_form_and_an_unchanged_original_are_current() -> None:
    compact, kept = kept_original()
    messages: list[BaseMessage] = [HumanMessage("hi"), compact, kept]
    assert without_stale(messages) is messages


def test_an_original_changed_since_capture_is_marked_replaced_once() -> None:
    _, kept = kept_original()
    masked = kept.model_copy(update={"content": MASKED})
    first = without_stale([masked])
    # the copy names the ref it withholds: masking took part of the output away
    assert annotation(first[0]) == {"replaced": True, "withheld": annotation(kept)["ref"]} and first[0].content == MASKED
    assert without_stale([masked])[0] is first[0], "the same copy on every call"
    # what was checked before ``start`` is taken as it is
    assert without_stale([masked], start=1) == [masked]


def test_an_edited_compact_form_is_marked_replaced() -> None:
    compact, _ = kept_original()
    edited = compact.model_copy(update={"content": str(compact.content).replace("4111-1111-1111-", "****-****-****-")})
    # still a summary: no facts are read from its lines
    assert annotation(without_stale([edited])[0]) == {"replaced": True, "summary": True, "withheld": annotation(compact)["ref"]}


NOTE = "Note: a reviewer replaced this call. Executed instead: payments with arguments {}.\n\nTool response:"


def test_text_put_before_a_captured_output_leads_its_compact_form() -> None:
    compact, kept = kept_original()
    note = {**annotation(kept), **content_marks(LOG)}
    noted = kept.model_copy(update={"content": f"{NOTE}\n{LOG}", "additional_kwargs": {META_KEY: note}})
    shown = without_stale([noted])[0]
    assert isinstance(shown, ToolMessage)
    assert annotation(shown)["ref"] == annotation(compact)["ref"]
    assert annotation(shown)["compact"] == f"{NOTE}\n{compact.content}"
    assert without_lead(shown).content == LOG
    # kept compact: the note before the compact form is the compact form now
    noted_compact = compact.model_copy(update={"content": f"{NOTE}\n{compact.content}"})
    assert annotation(without_stale([noted_compact])[0])["compact"] == noted_compact.content


def test_a_ref_is_withheld_when_its_output_lost_part_of_itself_after_capture() -> None:
    compact, kept = kept_original()
    ref = str(annotation(compact)["ref"])
    masked_compact = compact.model_copy(update={"content": str(compact.content).replace("4111-1111-1111-", "****-****-****-")})
    note = {**annotation(kept), **content_marks(LOG)}
    masked = kept.model_copy(update={"content": MASKED, "additional_kwargs": {META_KEY: note}})
    noted = kept.model_copy(update={"content": f"{NOTE}\n{LOG}", "additional_kwargs": {META_KEY: note}})
    assert withheld(ref, [masked_compact]) and withheld(f"see {ref}.", [HumanMessage("hi"), masked])
    assert not withheld(ref, [compact, kept, noted])
    assert not withheld(ref, [compact.model_copy(update={"content": f"{NOTE}\n{compact.content}"})])


def test_a_masked_output_is_scrubbed_of_what_its_annotation_kept_and_its_ref_stays_withheld() -> None:
    compact, kept = kept_original()
    ref = str(annotation(compact)["ref"])
    assert "4111-1111-1111-" in str(annotation(kept)["compact"]), "the compact form quotes the cards"
    note = {**annotation(kept), **content_marks(LOG)}
    masked = kept.model_copy(update={"content": MASKED, "additional_kwargs": {META_KEY: note}})
    masked_compact = compact.model_copy(update={"content": str(compact.content).replace("4111-1111-1111-", "****-****-****-")})
    for message, marked in ((masked, {"replaced": True}), (masked_compact, {"replaced": True, "summary": True})):
        clean = scrubbed(message)
        assert clean is not None and clean.id == message.id and clean.content == message.content
        assert annotation(clean) == {**marked, "withheld": ref}
        assert "4111-1111-1111-" not in str(clean.additional_kwargs)
        assert withheld(ref, [clean]) and not withheld("ref:payments:0123456789abcdef", [clean])
        assert scrubbed(clean) is None, "scrubbed once"
    # nothing was taken away: an unchanged output, its compact form, a note put before it
    noted = kept.model_copy(update={"content": f"{NOTE}\n{LOG}", "additional_kwargs": {META_KEY: note}})
    assert [scrubbed(m) for m in (compact, kept, noted, HumanMessage("hi"))] == [None] * 4


def test_an_annotation_with_recorded_marks_is_checked_by_them() -> None:
    _, kept = kept_original()
    # the LangGraph adapters record the length and a digest of the content
    note = {**annotation(kept), **content_marks(LOG)}
    marked = kept.model_copy(update={"additional_kwargs": {META_KEY: note}})
    assert without_stale([marked])[0] is marked
    masked = marked.model_copy(update={"content": MASKED})
    assert annotation(without_stale([masked])[0]) == {"replaced": True, "withheld": note["ref"]}


def test_an_original_with_images_is_checked_by_the_json_of_its_blocks() -> None:
    image = {"type": "image", "source_type": "base64", "data": "iVBORw0KGgo=", "mime_type": "image/png"}
    _, kept = kept_original([{"type": "text", "text": LOG}, image])
    assert without_stale([kept])[0] is kept
    masked = kept.model_copy(update={"content": [{"type": "text", "text": MASKED}, image]})
    assert annotation(without_stale([masked])[0]) == {"replaced": True, "withheld": annotation(kept)["ref"]}


def test_an_annotation_whose_ref_is_not_a_ref_is_left_alone() -> None:
    kept = ToolMessage(MASKED, tool_call_id="c", additional_kwargs={META_KEY: {"ref": "elsewhere", "compact": "x"}})
    assert without_stale([kept])[0] is kept


def test_masked_refs_names_the_refs_whose_outputs_were_masked_after_capture() -> None:
    from ctxplugin.cas import masked_refs

    compact, kept = kept_original()
    ref = annotation(compact)["ref"]
    masked = kept.model_copy(update={"content": MASKED})
    assert masked_refs([HumanMessage("hi"), compact, kept]) == ()
    assert masked_refs([HumanMessage("hi"), masked]) == (ref,)
    assert masked_refs([masked, HumanMessage("hi")], start=1) == (), "only the messages from start on"
    scrubbed_copy = scrubbed(masked)
    assert scrubbed_copy is not None and masked_refs([scrubbed_copy]) == (ref,), "a scrubbed copy still names it"
    # the same output captured twice is one ref: while another message shows it whole it stays
    again = kept.model_copy(update={"tool_call_id": "call_2", "id": "t2"})
    assert masked_refs([masked, again]) == ()
    assert masked_refs([masked, compact]) == ()
    # text put before the output takes nothing away
    note = {**annotation(kept), **content_marks(LOG)}
    noted = kept.model_copy(update={"content": f"{NOTE}\n{LOG}", "additional_kwargs": {META_KEY: note}})
    assert masked_refs([noted]) == ()


def test_an_output_cleared_from_one_request_withholds_nothing_at_rest() -> None:
    # LangChain's ContextEditingMiddleware puts a placeholder in the request only
    from ctxplugin.cas import masked_refs

    _, kept = kept_original()
    cleared = kept.model_copy(update={"content": "[cleared]", "response_metadata": {"context_editing": {"cleared": True}}})
    assert masked_refs([cleared]) == ()
    assert masked_refs([kept.model_copy(update={"content": MASKED}), cleared]) == (), "the state holds it whole"
