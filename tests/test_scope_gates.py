"""The order of a scope's clear and its prepares (``ScopeGates``) within one thread."""

from __future__ import annotations

import logging

import pytest

from ctxplugin._scope_gates import ScopeGates


def test_a_clear_inside_a_prepare_of_its_scope_does_not_wait_for_it(caplog: pytest.LogCaptureFixture) -> None:
    gates = ScopeGates(wait=1.0)  # a wait would end in a warning
    with caplog.at_level(logging.WARNING, logger="ctxplugin"):
        with gates.preparing("s1"), gates.preparing("s1"), gates.clearing("s1"), gates.clearing("s1"), gates.preparing("s1"):
            pass  # the last: a prepare the clear itself makes
        with gates.clearing("s1"):  # all let go: the next clear passes at once
            pass
    assert caplog.records == []


def test_other_scopes_pass_while_one_is_cleared(caplog: pytest.LogCaptureFixture) -> None:
    gates = ScopeGates(wait=1.0)  # a wait would end in a warning
    with caplog.at_level(logging.WARNING, logger="ctxplugin"), gates.clearing("s1"), gates.preparing("s2"), gates.clearing("s2"):
        pass
    assert caplog.records == []
