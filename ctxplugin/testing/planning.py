"""A team-offsite planning chat, for tests of long multi-turn conversations: the user sets a
city, a title and invitees, then adds one agenda item per turn (additions that must never
replace each other), and finally asks what was decided.

Example:
    >>> from ctxplugin.testing.planning import AGENDA, planning_turns
    >>> len(planning_turns()) == len(AGENDA) + 6
    True
"""

from __future__ import annotations

AGENDA = (
    "budget review", "hiring plan", "roadmap", "incident retro", "on-call rotation", "security audit",
    "vendor contracts", "Q3 goals", "customer feedback", "design system", "API deprecations",
    "data retention", "release cadence", "travel logistics", "mentoring program", "tech debt",
    "cloud costs", "observability", "accessibility", "documentation", "interview loop", "OKR scoring",
    "partner integrations", "open questions",
)
"""The agenda items the user adds, in order."""


def planning_turns() -> list[str]:
    """The user's turns: city, title, invitees (one added later), every agenda item, and the
    closing question ("Who is invited, where is it, and what is the title?")."""
    return [
        "We're planning the autumn team offsite. The offsite is in Lisbon.",
        "The title is Platform Offsite 2026.",
        "Invite the platform team only.",
        "Actually also invite design.",
        *(f"Add agenda item {i + 1}: {topic}." for i, topic in enumerate(AGENDA)),
        "That's the whole agenda for now.",
        "Who is invited, where is it, and what is the title?",
    ]


__all__ = ["AGENDA", "planning_turns"]
