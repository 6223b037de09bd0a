"""What the rules read from a user writing in French, German, Spanish, Portuguese or Italian: a
statement about something of theirs ("mon budget est de 900 EUR") keyed as in English, so a
correction replaces it; the words that announce a correction ("en fait", "eigentlich"...); and
hypotheticals ("supposons que", "angenommen"...), which are never current.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxplugin import ContextConfig, ContextEngine
from ctxplugin.config import FactsConfig
from ctxplugin.facts import ChromaFactStore, FactsLedger, MemoryFactStore, RuleExtractor
from ctxplugin.facts.model import FactQuery
from ctxplugin.scope import Scope

S = Scope(session_id="voyage-1", user_id="voyageur")


def ledger() -> FactsLedger:
    return FactsLedger(MemoryFactStore(), FactsConfig())


def current(facts: FactsLedger) -> list[str]:
    """The user's statements in force (not hypothetical, draft or superseded)."""
    query = FactQuery(reader=S, valid=True, scopes=("global", "session"))
    return sorted(f.text for f in facts.store.find(query))


def keyed(text: str) -> list[tuple[str | None, str]]:
    return [(d.key, d.scope) for d in RuleExtractor().from_text(text)]


# (language, first statement, correction, the correction as the fact shows it)
CORRECTIONS = [
    ("fr", "Mon budget est de 900 EUR.", "En fait, mon budget est de 1200 EUR.", "Mon budget est de 1200 EUR."),
    ("fr", "Mon budget est de 900 EUR.", "Finalement, mon budget est plutôt de 1200 EUR.", "Mon budget est plutôt de 1200 EUR."),
    ("fr", "Mes billets sont en classe éco.", "Ok, en fait mes billets sont en classe affaires.", "Mes billets sont en classe affaires."),
    ("de", "Mein Budget beträgt 900 EUR.", "Eigentlich beträgt mein Budget 1200 EUR.", "Eigentlich beträgt mein Budget 1200 EUR."),
    ("de", "Mein Budget beträgt 900 EUR.", "Doch, mein Budget ist 1200 EUR.", "Mein Budget ist 1200 EUR."),
    ("de", "Mein Budget beträgt 900 EUR.", "Doch ist mein Budget 1200 EUR.", "Doch ist mein Budget 1200 EUR."),
    ("de", "Mein Budget: 900 EUR.", "Mein Budget ist jetzt 1200 EUR.", "Mein Budget ist jetzt 1200 EUR."),
    ("de", "Mein Budget beträgt 900 EUR.", "Stattdessen ist mein Budget 1200 EUR.", "Stattdessen ist mein Budget 1200 EUR."),
    ("es", "Mi presupuesto es de 900 EUR.", "En realidad, mi presupuesto es de 1200 EUR.", "Mi presupuesto es de 1200 EUR."),
    ("es", "Mi presupuesto es de 900 EUR.", "Mejor dicho, mi presupuesto es de 1200 EUR.", "Mi presupuesto es de 1200 EUR."),
    ("es", "Mis fechas son el 3 y el 9 de mayo.", "Bueno, en realidad mis fechas son el 4 y el 10 de mayo.", "Mis fechas son el 4 y el 10 de mayo."),
    ("pt", "Meu orçamento é 900 EUR.", "Na verdade, meu orçamento é 1200 EUR.", "Meu orçamento é 1200 EUR."),
    ("pt", "O meu orçamento é de 900 EUR.", "Aliás, o meu orçamento é de 1200 EUR.", "O meu orçamento é de 1200 EUR."),
    ("it", "Il mio budget è di 900 EUR.", "In realtà, il mio budget è di 1200 EUR.", "Il mio budget è di 1200 EUR."),
    ("it", "Il mio budget è di 900 EUR.", "Anzi, il mio budget è di 1200 EUR.", "Il mio budget è di 1200 EUR."),
    ("it", "La mia città di partenza è Torino.", "Scusa, la mia città di partenza è invece Milano.", "La mia città di partenza è invece Milano."),
    # a German date keeps its month ("am 3. Mai" is no end of a sentence)
    ("de", "Mein Flug ist am 3. Mai.", "Eigentlich ist mein Flug am 5. Mai.", "Eigentlich ist mein Flug am 5. Mai."),
    # a correction word before a colon is no subject
    ("de", "Mein Abflug ist am 3. Mai.", "Korrektur: mein Abflug ist am 4. Mai.", "Mein Abflug ist am 4. Mai."),
    ("es", "Mi vuelo es el 3 de mayo.", "Corrección: mi vuelo es el 4 de mayo.", "Mi vuelo es el 4 de mayo."),
    ("it", "Il mio volo è il 3 maggio.", "Correzione: il mio volo è il 4 maggio.", "Il mio volo è il 4 maggio."),
    # "new" and "current" say which value holds; they name nothing else
    ("fr", "Mon e-mail est ana@ancien.fr.", "Mon nouvel e-mail est ana@nouveau.fr.", "Mon nouvel e-mail est ana@nouveau.fr."),
    ("fr", "Mon adresse est 3 rue Blanche.", "Mon adresse actuelle est 5 rue Noire.", "Mon adresse actuelle est 5 rue Noire."),
    ("de", "Mein Name ist Alice Weber.", "Mein neuer Name ist Alice Braun.", "Mein neuer Name ist Alice Braun."),
    ("es", "Mi correo es ana@viejo.es.", "Mi nuevo correo es ana@nuevo.es.", "Mi nuevo correo es ana@nuevo.es."),
    ("pt", "Meu telefone é 555-0100.", "Meu novo telefone é 555-0199.", "Meu novo telefone é 555-0199."),
    ("it", "Il mio indirizzo è via Roma 1.", "Il mio nuovo indirizzo è via Po 2.", "Il mio nuovo indirizzo è via Po 2."),
]


@pytest.mark.parametrize(("lang", "first", "then", "now"), CORRECTIONS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CORRECTIONS)])
def test_a_correction_replaces_the_earlier_value(lang: str, first: str, then: str, now: str) -> None:
    facts = ledger()
    (old,) = facts.ingest([HumanMessage(first, id="m1")], scope=S)
    (new,) = facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert old.key is not None and old.key.startswith("my_"), f"{lang}: {first!r} is not keyed"
    assert new.key == old.key
    assert new.supersedes == old.id
    assert current(facts) == [now]


@pytest.mark.parametrize(
    ("text", "english"),
    [
        ("En fait, ma ville est Lyon.", "Actually, my city is Lyon."),
        ("Ma ville est plutôt Lyon.", "Actually, my city is Lyon."),
        ("Ma ville est désormais Lyon.", "My city is now Lyon."),
        ("Eigentlich ist meine Stadt Köln.", "Actually, my city is Cologne."),
        ("Meine Stadt ist jetzt Köln.", "My city is now Cologne."),
        ("En realidad, mi ciudad es Sevilla.", "Actually, my city is Seville."),
        ("Na verdade, minha cidade é Porto.", "Actually, my city is Porto."),
        ("In realtà, la mia città è Torino.", "Actually, my city is Turin."),
        ("La mia città è invece Torino.", "My city is Turin instead."),
        ("Mi ciudad es Sevilla.", "My city is Seville."),  # a plain statement, not a correction
        ("Meu orçamento é 1200 EUR.", "My budget is 1200 EUR."),  # a budget is a limit
    ],
)
def test_a_correction_is_as_important_as_in_english(text: str, english: str) -> None:
    (draft,) = RuleExtractor().from_text(text)
    (said,) = RuleExtractor().from_text(english)
    assert (draft.importance, draft.kind) == (said.importance, said.kind)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("Mon budget est de 900 EUR et je pars de Lyon.", "my_budget"),
        ("Ma ville de départ est Lyon.", "my_ville_départ"),
        ("Mes dates sont le 3 et le 9 mai.", "my_dates"),
        ("Notre hôtel sera le Carlton.", "my_hôtel"),
        ("Nos billets sont en classe affaires.", "my_billets"),
        ("Mein Budget beträgt 900 EUR.", "my_budget"),
        ("Meine Adresse ist Hauptstraße 5.", "my_adresse"),
        ("Unser Hotel ist das Adlon.", "my_hotel"),
        ("Unsere Kinder sind 5 und 8 Jahre alt.", "my_kinder"),
        ("Jetzt ist unser Hotel das Adlon.", "my_hotel"),
        ("Mi presupuesto es de 900 EUR.", "my_presupuesto"),
        ("Mis fechas son el 3 y el 9 de mayo.", "my_fechas"),
        ("Nuestra ciudad de salida es Sevilla.", "my_ciudad_salida"),
        ("Meu orçamento é 900 EUR.", "my_orçamento"),
        ("A minha cidade é Porto.", "my_cidade"),
        ("Os meus voos são na segunda-feira.", "my_voos"),
        ("Il mio budget è di 900 EUR.", "my_budget"),
        ("La mia città di partenza è Torino.", "my_città_partenza"),
        ("I miei figli sono due.", "my_figli"),
        ("Le nostre camere sono prenotate.", "my_camere"),
        ("Mon budget, c'est 900 EUR.", "my_budget"),
        ("Mi dispiace, il mio budget è di 900 EUR.", "my_budget"),
        # a label before a colon, as French typography writes it
        ("Mon budget : 900 EUR.", "my_budget"),
        ("Meine Adresse: Hauptstraße 5.", "my_adresse"),
    ],
)
def test_a_statement_about_something_of_ones_own_is_keyed_by_it(text: str, key: str) -> None:
    assert keyed(text)[0] == (key, "global")


@pytest.mark.parametrize(
    "text",
    [
        "Mon budget n'est pas de 900 EUR.",  # a denial states no value
        "Mein Budget ist nicht 900 EUR.",
        "Meu orçamento não é 900 EUR.",
        "Il mio budget non è di 900 EUR.",
        "Mi sembra che il budget è di 900 EUR.",  # "mi" is "to me" here: the subject is a clause
        "Le budget de mon frère est de 900 EUR.",  # someone else's
        "Mi hermano dice que mi presupuesto es bajo y que el hotel es caro y lejos.",  # what someone says
    ],
)
def test_what_is_not_a_statement_about_ones_own_is_not_keyed_so(text: str) -> None:
    assert all(key is None for key, _ in keyed(text))


# (first statement, hypothetical about the same subject)
HYPOTHETICALS = [
    ("Mon budget est de 900 EUR.", "Supposons que mon budget soit de 2000 EUR."),
    ("Mon budget est de 900 EUR.", "Et si mon budget était de 2000 EUR ?"),
    ("Mon budget est de 900 EUR.", "Imaginons que mon budget soit de 2000 EUR."),
    ("Mein Budget beträgt 900 EUR.", "Angenommen, mein Budget wäre 2000 EUR."),
    ("Mein Budget beträgt 900 EUR.", "Was wäre, wenn mein Budget 2000 EUR wäre?"),
    ("Mein Budget beträgt 900 EUR.", "Falls mein Budget 2000 EUR beträgt, was dann?"),
    ("Mi presupuesto es de 900 EUR.", "Supongamos que mi presupuesto es de 2000 EUR."),
    ("Mi presupuesto es de 900 EUR.", "¿Y si mi presupuesto fuera de 2000 EUR?"),
    ("Mi presupuesto es de 900 EUR.", "Imagina que mi presupuesto es de 2000 EUR."),
    ("Meu orçamento é 900 EUR.", "Suponha que meu orçamento seja 2000 EUR."),
    ("Meu orçamento é 900 EUR.", "E se meu orçamento fosse 2000 EUR?"),
    ("Il mio budget è di 900 EUR.", "Supponiamo che il mio budget sia di 2000 EUR."),
    ("Il mio budget è di 900 EUR.", "E se il mio budget fosse di 2000 EUR?"),
]


@pytest.mark.parametrize(("first", "what_if"), HYPOTHETICALS)
def test_a_hypothetical_is_never_current(first: str, what_if: str) -> None:
    facts = ledger()
    (old,) = facts.ingest([HumanMessage(first, id="m1")], scope=S)
    (supposed,) = facts.ingest([HumanMessage(what_if, id="m2")], scope=S)
    assert supposed.scope == "hypothetical"
    assert supposed.key == old.key, "keyed by its subject, as an English hypothetical is"
    assert current(facts) == [first]


# two statements about different things of one's own: neither replaces the other
UNRELATED = [
    ("Mon budget hôtel est de 900 EUR.", "Mon budget vol est de 1200 EUR."),
    ("Mon budget pour l'hôtel est de 900 EUR.", "En fait, mon budget pour le vol est de 1200 EUR."),
    ("Mein Hotelbudget beträgt 900 EUR.", "Eigentlich beträgt mein Flugbudget 1200 EUR."),
    ("Mi presupuesto de hotel es de 900 EUR.", "En realidad, mi presupuesto de vuelo es de 1200 EUR."),
    ("Meu orçamento do hotel é 900 EUR.", "Na verdade, meu orçamento do voo é 1200 EUR."),
    ("Il mio budget per l'hotel è di 900 EUR.", "In realtà, il mio budget per il volo è di 1200 EUR."),
    ("Ma ville est Lyon.", "Mon budget est de 1200 EUR."),
]


@pytest.mark.parametrize(("first", "then"), UNRELATED)
def test_a_statement_about_something_else_replaces_nothing(first: str, then: str) -> None:
    facts = ledger()
    (a,) = facts.ingest([HumanMessage(first, id="m1")], scope=S)
    (b,) = facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert a.key is not None and b.key is not None and a.key != b.key
    assert b.supersedes is None
    assert len(current(facts)) == 2


@pytest.mark.parametrize(
    ("both", "then", "now"),
    [
        ("Mon budget est de 900 EUR et ma ville est Lyon.", "En fait, ma ville est Paris.",
         ["Ma ville est Paris.", "Mon budget est de 900 EUR"]),
        ("Mein Budget ist 900 EUR und meine Stadt ist Köln.", "Eigentlich ist meine Stadt Bonn.",
         ["Eigentlich ist meine Stadt Bonn.", "Mein Budget ist 900 EUR"]),
        ("Mi presupuesto es de 900 EUR y mi ciudad es Sevilla.", "En realidad, mi ciudad es Cádiz.",
         ["Mi ciudad es Cádiz.", "Mi presupuesto es de 900 EUR"]),
        ("Meu orçamento é 900 EUR e minha cidade é Porto.", "Na verdade, minha cidade é Braga.",
         ["Meu orçamento é 900 EUR", "Minha cidade é Braga."]),
        ("Il mio budget è di 900 EUR e la mia città è Torino.", "In realtà, la mia città è Milano.",
         ["Il mio budget è di 900 EUR", "La mia città è Milano."]),
    ],
)
def test_statements_about_two_things_joined_by_and_are_replaced_one_by_one(both: str, then: str, now: list[str]) -> None:
    facts = ledger()
    facts.ingest([HumanMessage(both, id="m1")], scope=S)
    facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert current(facts) == now


def test_the_engine_shows_only_the_corrected_value() -> None:
    engine, scope, messages = ContextEngine(ContextConfig()), Scope(session_id="fr"), list[BaseMessage]()
    for text in ("Mon budget est de 900 EUR et je pars de Lyon.", "En fait, mon budget est de 1200 EUR.",
                 "Supposons que mon budget soit de 3000 EUR, alors ?"):
        messages.append(HumanMessage(text))
        engine.prepare(messages, scope=scope)
        messages.append(AIMessage("Noté."))
    found = engine.facts.store.find(FactQuery(reader=scope))
    now = [(f.text, f.key) for f in found if f.is_valid and f.scope == "global"]
    assert now == [("Mon budget est de 1200 EUR.", "my_budget")]
    assert [f.scope for f in found if "3000" in f.text] == ["hypothetical"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # English starting with a word of these languages: read by the English rules alone
        ("Falls below 5% trigger an alert.", ("Falls below 5% trigger an alert.", None, "global", 0.8)),
        ("Bon Jovi is playing on Friday.", ("Bon Jovi is playing on Friday.", "bon_jovi", "global", 0.5)),
        ("Ma Rainey is the headliner.", ("Ma Rainey is the headliner.", "ma_rainey", "global", 0.5)),
        ("The alias is prod-db.", ("The alias is prod-db.", "alias", "global", 0.5)),
        ("Doch is a name.", ("Doch is a name.", "doch", "global", 0.5)),
        ("No, my budget is 1200 EUR.", ("My budget is 1200 EUR.", "my_budget", "global", 0.8)),
        ("What if my budget were 2000 EUR?", ("What if my budget were 2000 EUR?", "my_budget", "hypothetical", 0.8)),
    ],
)
def test_english_is_read_as_before(text: str, expected: tuple[str, str | None, str, float]) -> None:
    (draft,) = RuleExtractor().from_text(text)
    assert (draft.text, draft.key, draft.scope, draft.importance) == expected


def test_keys_with_accents_supersede_in_a_persistent_store(tmp_path: Path) -> None:
    with ChromaFactStore.persistent(tmp_path) as store:
        facts = FactsLedger(store, FactsConfig())
        (budget,) = facts.ingest([HumanMessage("Meu orçamento é 900 EUR.", id="m1")], scope=S)
        (hotel,) = facts.ingest([HumanMessage("Mon budget pour l'hôtel est de 300 EUR.", id="m2")], scope=S)
        # the same words typed as letters and combining accents, and the hotel without "pour l'"
        (new_budget,) = facts.ingest([HumanMessage(unicodedata.normalize("NFD", "Na verdade, meu orçamento é 1200 EUR."), id="m3")], scope=S)
        (new_hotel,) = facts.ingest([HumanMessage("En fait, mon budget hôtel est de 400 EUR.", id="m4")], scope=S)
        assert (budget.key, hotel.key) == ("my_orçamento", "my_budget_hôtel")
        assert (new_budget.supersedes, new_hotel.supersedes) == (budget.id, hotel.id)
        assert new_budget.importance == new_hotel.importance == 0.8  # a budget: a constraint
        assert facts.current("my_orçamento", scope=S) == new_budget
