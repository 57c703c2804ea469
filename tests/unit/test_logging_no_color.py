"""Console logs honour NO_COLOR (https://no-color.org): set to anything but "", no ANSI colours, even on a
terminal; unset or empty, colours on a terminal only."""

from __future__ import annotations

import io

import pytest

from auditor.logging import configure_logging, console_colours, get_logger

ESC = "\x1b["


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _line(monkeypatch: pytest.MonkeyPatch, no_color: str | None, stream: io.StringIO) -> str:
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    configure_logging("info", "console", stream=stream)
    try:
        get_logger("auditor.test").warning("bookie lost", bookie="127.0.0.2:3182")
    finally:
        configure_logging("info", "json")  # as the other tests expect it
    return stream.getvalue()


@pytest.mark.parametrize("value", ["1", "true", "0"])
def test_no_color_set_means_no_ansi_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    text = _line(monkeypatch, value, Terminal())
    assert "bookie lost" in text and "127.0.0.2:3182" in text
    assert ESC not in text


@pytest.mark.parametrize("value", [None, ""])
def test_colours_on_a_terminal_when_no_color_is_unset_or_empty(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    assert ESC in _line(monkeypatch, value, Terminal())
    assert ESC not in _line(monkeypatch, value, io.StringIO())  # not a terminal


def test_console_colours_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    assert console_colours(Terminal()) is False
    monkeypatch.setenv("NO_COLOR", "")
    assert console_colours(Terminal()) is True and console_colours(io.StringIO()) is False
