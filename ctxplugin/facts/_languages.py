"""What the extraction rules read in French, German, Spanish, Portuguese and Italian.

The rules are written for English. A user writing in one of these five languages gets three of
them, read here and tried only where the English rules find nothing of their kind:

- a statement about something of theirs: a possessive, what it is about, a copula and a value
  ("mon budget est de 900 EUR", "mein Budget beträgt 900 EUR", "mi presupuesto es de 900 EUR",
  "o meu orçamento é 900 EUR", "il mio budget è di 900 EUR"). It is keyed like English "my
  budget is ...": ``my_`` and the content words of what it is about (at most three, articles and
  prepositions left out, accents kept as written), so ``my_budget``, ``my_orçamento``,
  ``my_budget_hôtel`` for "mon budget pour l'hôtel"; "new" and "current" ("nouvel", "neuer",
  "nuevo", "atual"...) say which value holds and are left out too. A later statement under the
  key replaces it. German is also read with the verb second, after a leading word ("eigentlich ist mein
  Budget ..."), and last, after a hypothetical ("falls mein Budget 2000 EUR beträgt"), taking
  one word as the subject. The same possessive before a colon ("Mon budget : 900 EUR"), or
  French "mon budget, c'est ...", gives the same key; two such statements joined by "et",
  "und", "y", "e" are one fact each, as English "A is X and B is Y" is;
- the words that announce a correction ("en fait", "eigentlich", "en realidad", "na verdade",
  "in realtà"...) or lead a sentence ("alors", "übrigens", "bueno", "então", "allora"...): left
  out of the fact's text and of its subject, and a correction counts as English "actually" does;
- a hypothetical ("supposons que", "et si", "angenommen", "falls", "¿y si", "e se", "supponiamo
  che"...) at the start of a sentence: its fact is in the ``hypothetical`` fact scope, so it is
  never current, as with English "suppose" and "what if".

A budget, a limit or a deadline named in these languages ("presupuesto", "orçamento",
"Frist"...) makes such a statement with a number in its value a constraint, as "budget" does in
English.
Nothing else is read in these languages: preferences, decisions, tasks, "X, not Y" and the
other rules are English-only.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace

from ctxplugin.facts._discourse import LEAD as _ENGLISH_LEAD
from ctxplugin.facts._text import STOPWORDS, words


def _words(*phrases: str) -> str:
    """An alternation of ``phrases``, longest first (so "en fait" is tried before "en")."""
    return "|".join(sorted((p.replace(" ", r"\s+") for p in phrases), key=len, reverse=True))


_CORRECTING = _words(
    "en fait", "en réalité", "finalement", "plutôt", "plutot", "au final",  # fr
    "eigentlich", "stattdessen", "vielmehr", "tatsächlich", "korrektur", "berichtigung",  # de
    "en realidad", "mejor dicho", "más bien", "de hecho", "al final", "corrección", "en vez de eso",  # es
    "na verdade", "aliás", "na realidade", "afinal", "de fato", "correção", "em vez disso",  # pt
    "in realtà", "anzi", "invece", "piuttosto", "a dire il vero", "alla fine", "in effetti", "correzione",  # it
)
"""Words that announce a correction, as "actually" and "instead" do (and German "doch", which
leads a sentence only before a comma: "Doch, ...")."""
_NOW = _words("désormais", "maintenant", "jetzt", "nun", "ahora", "agora", "ora", "adesso")
"""After a copula, a new value: "est désormais", "ist jetzt" (English "is now")."""
_LEADING = _words(
    "alors", "donc", "bon", "eh bien", "du coup", "bref", "au fait", "pardon", "désolé", "désolée", "attends",
    "oups", "d'accord",  # fr
    "übrigens", "na ja", "naja", "entschuldigung", "entschuldige", "tut mir leid", "ach", "okay", "ok",  # de
    "bueno", "pues", "entonces", "vale", "oye", "perdón", "perdona", "lo siento", "espera", "por cierto",  # es
    "então", "pois", "olha", "desculpa", "desculpe", "perdão", "por falar nisso",  # pt
    "allora", "dunque", "beh", "scusa", "scusi", "scusate", "mi dispiace", "aspetta", "comunque", "però",  # it
)
"""Discourse before a statement. Short words shared with another language or with English
("ma", "no", "sim", "ja"...) count only when a comma follows them (``_BEFORE_COMMA``)."""
_BEFORE_COMMA = _words("non", "oui", "mais", "ja", "nein", "aber", "also", "sí", "si", "no", "pero", "sim", "não", "mas", "sì", "ma")
_LEAD = re.compile(
    rf"^(?:(?:(?P<correction>{_CORRECTING})|{_LEADING})\b[\s,:;!.-]*|(?:(?P<doch>doch)|{_BEFORE_COMMA})\s*,\s*)",
    re.IGNORECASE,
)
_CORRECTION = re.compile(
    rf"(?<!\w)(?:{_CORRECTING}|doch)(?!\w)|\s(?:est|ist|es|é|è)\s+(?:{_NOW})(?!\w)|(?<!\w)(?:{_NOW})\s+(?:est|ist|es|é|è)(?!\w)",
    re.IGNORECASE,
)
"""A correction anywhere in a sentence, or a new value ("est désormais", "ahora es": "is now")."""
_GERMAN_SUBJECT = r"(?:ich|wir|du|er|sie|es|man|mein\w*|unser\w*|der|die|das|dein\w*|ihr\w*)"
_HYPOTHETICAL = re.compile(
    r"^[¿¡]?\s*(?:"
    + _words(
        "supposons que", "supposons qu'", "supposons", "et si", "imaginons que", "imaginons qu'", "imaginons",
        "imaginez que", "imagine que", "admettons que", "admettons", "mettons que", "si jamais", "hypothétiquement",
        "en théorie",  # fr
        "angenommen", "mal angenommen", "nehmen wir an", "gesetzt den fall", "was wäre, wenn", "was wäre wenn",
        "was, wenn", "was wenn", "stell dir vor", "stellen sie sich vor", "hypothetisch", "theoretisch",  # de
        "supongamos que", "supongamos", "suponiendo que", "y si", "imagina que", "imaginemos que", "imagínate que",
        "pongamos que", "hipotéticamente", "en teoría", "qué pasaría si", "que pasaría si",  # es
        "suponha que", "suponhamos que", "supondo que", "vamos supor que", "e se", "imagine que", "imaginemos que",
        "hipoteticamente", "em teoria", "o que aconteceria se",  # pt
        "supponiamo che", "supponendo che", "poniamo che", "mettiamo che", "immagina che", "immaginiamo che",
        "immaginate che", "ipoteticamente", "in teoria", "cosa succederebbe se",  # it
    )
    + rf"|falls(?=\s+{_GERMAN_SUBJECT}\b))(?:(?<=')|(?!\w))[\s,:;-]*",
    re.IGNORECASE,
)
"""A hypothetical at the start of a sentence ("falls" only before a German subject: "falls mein
Budget ...", never English "falls below")."""

_POSSESSIVE = (
    r"(?:(?:il|lo|la|i|gli|le|o|a|os|as)\s+|l')?"  # "il mio", "o meu": pt and it put an article first
    r"(?P<own>mon|ma|mes|notre|nos"  # fr
    r"|mein|meine|meinen|meinem|meiner|meines|unser|unsere|unseren|unserem|unserer|unseres"  # de
    r"|mi|mis|nuestro|nuestra|nuestros|nuestras"  # es
    r"|meu|minha|meus|minhas|nosso|nossa|nossos|nossas"  # pt
    r"|mio|mia|miei|mie|nostro|nostra|nostri|nostre)"  # it
)
_COPULA = _words(
    "est", "sont", "était", "étaient", "sera", "seront", "serait", "soit", "soient", "devient", "passe à",  # fr
    "ist", "sind", "war", "waren", "wird", "wäre", "wären", "sei", "beträgt", "betragen", "betrüge",
    "liegt bei", "liegen bei", "lautet", "lauten",  # de
    "es", "son", "era", "eran", "será", "serán", "sería", "sea", "sean", "fuera", "fueran", "fuese", "está",
    "están", "pasa a",  # es
    "é", "são", "eram", "seja", "sejam", "fosse", "fossem", "seria", "fica em", "passa a ser", "passa para",  # pt
    "è", "sono", "erano", "sia", "siano", "fossero", "sarà", "sarebbe", "diventa", "ammonta a", "passa a",  # it
)
_NOT_SUBJECT = frozenset(
    # conjunctions and pronouns: "mi sembra che ...", "mi hermano dice que ...", "mon budget n'est ..."
    ["que", "qui", "qu", "che", "dass", "wenn", "ob", "se", "si", "y", "et", "und", "e", "ou", "oder", "o", "ne",
     "nicht", "pas", "no", "non", "não", "dice", "dit", "sagt", "diz", "detto", "dicho",
     *_COPULA.replace(r"\s+", " ").split("|")]
)
_FUNCTION = frozenset(
    # articles and prepositions left out of a key: "mon budget pour l'hôtel" is my_budget_hôtel
    ["de", "du", "des", "la", "le", "les", "un", "une", "pour", "au", "aux", "en", "sur",
     "der", "die", "das", "dem", "den", "ein", "eine", "für", "von", "vom", "zum", "zur", "im", "am",
     "del", "el", "los", "las", "para", "al", "con", "uno", "una", "por",
     "do", "da", "dos", "um", "uma", "no", "na", "nos", "nas", "com", "pelo", "pela", "em",
     "di", "della", "dello", "dei", "degli", "delle", "il", "lo", "gli", "per", "dal", "nel", "nella", "sul"]
)
_SUBJECT = r"(?P<subj>[^\W\d_][\w'’-]*(?:\s+[^\W\d_][\w'’-]*){0,3}?)"
_STATEMENT = re.compile(
    rf"^{_POSSESSIVE}\s+{_SUBJECT}(?:\s+(?:{_NOW}|{_CORRECTING}))*(?:\s+(?:{_COPULA})|\s*,\s*c'est)(?!\w)(?:\s+(?:{_NOW}|{_CORRECTING}))*"
    r"(?:\s+(?:de|di|à|a|bei|en|em)(?!\w)|\s+d')?\s*(?P<val>[^\s.!?].*)$",
    re.IGNORECASE,
)
"""A statement about something of one's own: possessive, subject, copula, value."""
_OWN = re.compile(rf"^{_POSSESSIVE}\s+(?P<subj>[^\W\d_][\w' -]*)$", re.IGNORECASE)
_GERMAN_VERB = _words("ist", "sind", "war", "waren", "wird", "wäre", "wären", "sei", "beträgt", "betragen", "betrüge",
                      "liegt bei", "liegen bei", "läge bei", "lautet", "lauten")
_GERMAN_FIRST = re.compile(
    rf"^(?:[^\W\d_]+\s+)?(?:{_GERMAN_VERB})\s+(?P<own>mein\w*|unser\w*)\s+(?P<subj>[^\W\d_][\w-]*)\s+(?:(?:{_NOW}|doch|eigentlich|bei)\s+)*"
    r"(?P<val>[^\s.!?].*)$",
    re.IGNORECASE,
)
"""German with the verb second, after a leading word: "Eigentlich beträgt mein Budget 1200 EUR",
"Jetzt ist mein Budget ..."."""
_GERMAN_LAST = re.compile(
    rf"^(?P<own>mein\w*|unser\w*)\s+(?P<subj>[^\W\d_][\w-]*)\s+(?P<val>[^\s.!?].*?)\s+(?:{_GERMAN_VERB})(?:\s*,.*)?$",
    re.IGNORECASE,
)
"""German with the verb last, in the clause after a hypothetical: "(was wäre, wenn) mein Budget
2000 EUR wäre", "(falls) mein Budget 2000 EUR beträgt, ..."."""
_LIMITS = (
    (re.compile(r"\b(?:presupuesto|orçamento|orcamento|bilancio|plafond|tope|teto|tetto|obergrenze|höchstbetrag)\b", re.IGNORECASE), "budget"),
    (re.compile(r"\b(?:date limite|échéance|frist|stichtag|fecha límite|plazo|prazo|data limite|scadenza)\b", re.IGNORECASE), "deadline"),
)
_DIGIT = re.compile(r"\d")
_DENIAL = re.compile(r"(?:nicht|kein\w*|pas|no|non|não|nie|jamais|mai)(?!\w)", re.IGNORECASE)
"""A value denied ("ist nicht 900 EUR"): the English rules tell what a denial replaces, these
languages' are left unkeyed."""
_AND = re.compile(r",?\s+(?:et|und|y|e)\s+|;\s+", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Reading:
    """What a sentence says in one of the five languages.

    Attributes:
        start: where the statement starts in the sentence, after its leading words.
        key: ``my_`` and its subject, for a statement about something of one's own, else None.
        value: what that statement says the subject is.
        correction: the sentence announces a correction.
        hypothetical: the sentence starts as a hypothetical.
        limit: ``"budget"`` or ``"deadline"`` when it names one and states an amount or a date.
    """

    start: int
    key: str | None
    value: str | None
    correction: bool
    hypothetical: bool
    limit: str | None


def read(sentence: str) -> Reading | None:
    """The reading of ``sentence`` (apostrophes as ``'``), or None when it holds no correction,
    hypothetical or statement about something of one's own in these languages (an English
    sentence is left to the English rules)."""
    composed = unicodedata.normalize("NFC", sentence)  # "é" typed as "e" and an accent reads as "é"
    if composed != sentence:
        reading = read(composed)
        return reading and replace(reading, start=0)  # its offsets are the composed text's
    start, correction = 0, False
    while True:  # "OK, en fait, ...", "Bon, alors ..."
        rest = sentence[start:]
        lead = _ENGLISH_LEAD.match(rest) or _LEAD.match(rest)
        if lead is None or not lead.end():
            break
        start += lead.end()
        correction = correction or (lead.re is _LEAD and (lead.group("correction") or lead.group("doch")) is not None)
    hypothesis = _HYPOTHETICAL.match(sentence[start:])
    body = sentence[start + hypothesis.end() if hypothesis else start :].strip().rstrip(".!?").strip()
    match = _STATEMENT.match(body) or _GERMAN_FIRST.match(body) or (_GERMAN_LAST.match(body) if hypothesis else None)
    key = _key(match.group("subj")) if match and not _DENIAL.match(match.group("val")) else None
    value = match.group("val") if match and key else None
    if not (hypothesis or key or correction):
        return None  # a correction word further on counts in a sentence read here, not in English
    correction = correction or bool(_CORRECTION.search(sentence))
    if match is not None and match.re is _GERMAN_FIRST and not hypothesis:
        start = 0  # "Eigentlich beträgt mein Budget ...": the verb needs the word before it
    limit = next((name for pattern, name in _LIMITS if pattern.search(sentence)), None) if value and _DIGIT.search(value) else None
    return Reading(start, key, value, correction, hypothesis is not None, limit)


def parts(sentence: str) -> list[str]:
    """``sentence``, or its clauses when it joins statements about different things of one's own
    ("mon budget est de 900 EUR et ma ville est Lyon"), each keyed by its own subject."""
    clauses = _AND.split(sentence) if _AND.search(sentence) else []
    keys = [reading.key if (reading := read(c.rstrip(".!"))) else None for c in clauses]
    return clauses if keys and all(keys) and len(set(keys)) == len(keys) else [sentence]


def hypothetical(sentence: str) -> bool:
    """Whether ``sentence`` starts as a hypothetical in these languages (after leading words)."""
    reading = read(sentence)
    return reading is not None and reading.hypothetical


_CURRENT = frozenset(
    # which value holds, not what it is of: "mon nouvel e-mail" is my_e-mail, as "my new email" is my_email
    ["nouveau", "nouvel", "nouvelle", "nouveaux", "nouvelles", "actuel", "actuelle", "actuels", "actuelles",
     "neu", "neue", "neuer", "neues", "neuen", "neuem", "aktuell", "aktuelle", "aktueller", "aktuelles", "aktuellen",
     "nuevo", "nueva", "nuevos", "nuevas", "actual", "actuales", "novo", "nova", "novos", "novas", "atual", "atuais",
     "nuovo", "nuova", "nuovi", "nuove", "attuale", "attuali"]
)


def own(subject: str) -> str | None:
    """The key of ``subject`` when it is something of one's own in these languages ("mon
    budget", "meine Adresse" before a colon: ``my_budget``, ``my_adresse``), else None."""
    match = _OWN.match(subject)
    return _key(match.group("subj")) if match else None


def _key(subject: str) -> str | None:
    """``my_`` and the content words of ``subject`` (what a statement about something of one's
    own is about), or None when it reads as a clause rather than a noun."""
    said = words(subject)
    if not said or any(w in _NOT_SUBJECT for w in said):
        return None
    kept = [w for w in said if len(w) > 1 and w not in STOPWORDS and w not in _FUNCTION and w not in _CURRENT and not w.isdigit()]
    if not kept or len(kept) > 3:
        return None
    return "my_" + "_".join(kept)


__all__ = ["Reading", "hypothetical", "own", "parts", "read"]
