"""Ten tools shaped like tau-bench's airline set, for agent tests: each records its calls, so a
test can tell which tools really ran and with what arguments.

Example:
    >>> from ctxplugin.testing.airline import airline_tools
    >>> ran: list = []
    >>> [t.name for t in airline_tools(ran)][:2]
    ['get_user_details', 'get_reservation_details']
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from ctxplugin._layout import header_length
from ctxplugin.tokens import content_text

Ran = list[tuple[str, dict[str, Any]]]
"""The calls the tools ran: ``(tool name, the arguments it records)``, in order."""


def airline_tools(ran: Ran) -> list[BaseTool]:
    """Ten tools shaped like tau-bench's airline set; each records its calls in ``ran``."""

    @tool
    def get_user_details(user_id: str) -> str:
        """Get the details of a user, including their reservations. Returns JSON."""
        ran.append(("get_user_details", {"user_id": user_id}))
        return json.dumps({"user_id": user_id, "name": "Mia Li", "reservations": ["NO6JO3"]})

    @tool
    def get_reservation_details(reservation_id: str) -> str:
        """Get the details of a reservation."""
        ran.append(("get_reservation_details", {"reservation_id": reservation_id}))
        return json.dumps({"reservation_id": reservation_id, "origin": "SFO", "destination": "JFK"})

    @tool
    def search_direct_flight(origin: str, destination: str, date: str) -> str:
        """Search direct flights between two cities on a specific date."""
        ran.append(("search_direct_flight", {"origin": origin, "destination": destination, "date": date}))
        return json.dumps([{"flight_number": "HAT001", "origin": origin, "destination": destination, "date": date}])

    @tool
    def cancel_reservation(reservation_id: str) -> str:
        """Cancel the whole reservation."""
        ran.append(("cancel_reservation", {"reservation_id": reservation_id}))
        return "cancelled"

    @tool
    def update_reservation_baggages(reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str) -> str:
        """Update the baggage information of a reservation."""
        ran.append(("update_reservation_baggages", {"reservation_id": reservation_id, "total_baggages": total_baggages}))
        return f"{reservation_id}: {total_baggages} bags"

    @tool
    def send_certificate(user_id: str, amount: int) -> str:
        """Send a certificate to a user. Be careful!"""
        ran.append(("send_certificate", {"user_id": user_id, "amount": amount}))
        return "sent"

    @tool
    def list_all_airports() -> str:
        """List all airports and their cities."""
        ran.append(("list_all_airports", {}))
        return "SFO, JFK, SEA"

    @tool
    def calculate(expression: str) -> str:
        """Calculate the result of a mathematical expression."""
        ran.append(("calculate", {"expression": expression}))
        return "42"

    @tool
    def think(thought: str) -> str:
        """Use the tool to think about something. It will not obtain new information."""
        ran.append(("think", {"thought": thought}))
        return ""

    @tool
    def transfer_to_human_agents(summary: str) -> str:
        """Transfer the user to a human agent, with a summary of the user's issue."""
        ran.append(("transfer_to_human_agents", {"summary": summary}))
        return "transferred"

    return [get_user_details, get_reservation_details, search_direct_flight, cancel_reservation,
            update_reservation_baggages, send_certificate, list_all_airports, calculate, think,
            transfer_to_human_agents]


def system_text(messages: list[BaseMessage]) -> str:
    """The text of the header a model was sent: its system prompt, then the tool directory
    (each its own system message), joined by a blank line."""
    assert isinstance(messages[0], SystemMessage)
    return "\n\n".join(content_text(m.content) for m in messages[: header_length(messages)])


def last_tool_result(messages: list[BaseMessage]) -> ToolMessage:
    """The newest tool result sent (a facts block may follow it)."""
    return next(m for m in reversed(messages) if isinstance(m, ToolMessage))


__all__ = ["Ran", "airline_tools", "last_tool_result", "system_text"]
