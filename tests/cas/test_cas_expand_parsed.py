"""Reading a large JSON output again parses it once: the parsed value is kept, per ref and
exact content, in a small bounded memo; what each read returns is unchanged."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from pytest_mock import MockerFixture

from ctxplugin.cas import SQLiteCASStore, expand, expand_for_model
from ctxplugin.errors import RefNotFoundError
from ctxplugin.scope import Scope
from ctxplugin.testing.cas_contract import make_item
from ctxplugin.tokens import get_counter

SCOPE = Scope(session_id="big-json")
# the module: the package exports its function of the same name
expand_module = importlib.import_module("ctxplugin.cas.expand")


def _rows(tag: str, count: int = 2000) -> list[dict[str, object]]:
    return [{"id": f"{tag}-{i}", "level": "ERROR" if i == 1234 else "INFO", "msg": f"served {i} in {i % 97} ms"} for i in range(count)]


def _stored(store: SQLiteCASStore, tag: str) -> tuple[str, list[dict[str, object]]]:
    rows = _rows(tag)
    item = make_item(json.dumps(rows), kind="logs")
    store.put(item, SCOPE)
    return item.ref_id, rows


def test_a_second_read_of_the_same_ref_does_not_parse_it_again(tmp_path: Path, mocker: MockerFixture) -> None:
    store = SQLiteCASStore(tmp_path / "cas.db")
    ref, rows = _stored(store, "a")
    parse = mocker.spy(expand_module, "parse_json")
    assert json.loads(expand(store, ref, SCOPE, offset=10, limit=2)) == rows[10:12]
    assert parse.call_count == 1
    assert json.loads(expand(store, ref, SCOPE, offset=10, limit=2)) == rows[10:12]
    assert json.loads(expand(store, ref, SCOPE, pattern="ERROR")) == [rows[1234]]
    assert json.loads(expand(store, ref, SCOPE, fields=["[3].id"])) == "a-3"
    assert parse.call_count == 1, "the same ref and content: parsed once"
    other, other_rows = _stored(store, "b")
    assert json.loads(expand(store, other, SCOPE, offset=0, limit=1)) == other_rows[:1]
    assert parse.call_count == 2, "a different ref is parsed"


def test_the_model_facing_read_is_unchanged_by_the_memo(tmp_path: Path, mocker: MockerFixture) -> None:
    store = SQLiteCASStore(tmp_path / "cas.db")
    ref, _ = _stored(store, "m")
    counter = get_counter()[0]
    parse = mocker.spy(expand_module, "parse_json")
    first = expand_for_model(store, ref, SCOPE, max_tokens=500, counter=counter, pattern="ERROR")
    again = expand_for_model(store, ref, SCOPE, max_tokens=500, counter=counter, pattern="ERROR")
    paged = expand_for_model(store, ref, SCOPE, max_tokens=500, counter=counter, offset=5, limit=3)
    assert first == again and "m-1234" in first and '"m-5"' in paged
    assert parse.call_count == 1


def test_the_memo_is_no_way_around_the_grants(tmp_path: Path) -> None:
    store = SQLiteCASStore(tmp_path / "cas.db")
    ref, _ = _stored(store, "s")
    expand(store, ref, SCOPE, offset=0, limit=1)
    with pytest.raises(RefNotFoundError):
        expand(store, ref, Scope(session_id="another"), offset=0, limit=1)


def test_the_memo_keeps_a_few_outputs(tmp_path: Path, mocker: MockerFixture) -> None:
    store = SQLiteCASStore(tmp_path / "cas.db")
    refs = [_stored(store, f"r{i}")[0] for i in range(5)]
    parse = mocker.spy(expand_module, "parse_json")
    for ref in refs:
        expand(store, ref, SCOPE, offset=0, limit=1)
    assert parse.call_count == 5
    expand(store, refs[-1], SCOPE, offset=0, limit=1)
    assert parse.call_count == 5, "the latest ones are kept"
    expand(store, refs[0], SCOPE, offset=0, limit=1)
    assert parse.call_count == 6, "the oldest went: the memo is bounded"
