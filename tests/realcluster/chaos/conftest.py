"""Fixtures of the chaos smoke tests."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture
def quiet_kazoo() -> Iterator[None]:
    """Our ZooKeeper clients reconnect through the campaigns' ZooKeeper restarts: their chatter stays out
    of the test's output, for that test only."""
    kazoo_log = logging.getLogger("kazoo")
    level = kazoo_log.level
    kazoo_log.setLevel(logging.ERROR)
    yield
    kazoo_log.setLevel(level)
