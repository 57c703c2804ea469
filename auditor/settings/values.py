"""Value parsing shared by the settings: bind addresses, daily time windows, lists written as text, and
one-line error wording. Nothing here knows the settings model."""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from datetime import time
from typing import Any

# The one default admin address: admin.bind's default, and where the CLI's clients look unless told.
DEFAULT_ADMIN_ADDRESS = "127.0.0.1:7979"


def parse_bind(text: str) -> tuple[str, int]:
    """'host:port' or '[v6]:port' -> (host, port). Port 0 means "any free port" (tests). An IPv6 address
    without brackets ('fd00::7:7979', the last colon before the port) is accepted too: that is what
    Kubernetes' "$(POD_IP):7979" gives on an IPv6 pod network."""
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:([0-9]{1,5})|([^:\[\]\s]+):([0-9]{1,5})", text.strip())
    if not m:
        v6, _, port_text = text.strip().rpartition(":")
        if _is_ipv6(v6) and re.fullmatch(r"[0-9]{1,5}", port_text):
            m = re.fullmatch(r"\[(.+)\]:(.+)", f"[{v6}]:{port_text}")
    if not m:
        raise ValueError(f"must be host:port (e.g. {DEFAULT_ADMIN_ADDRESS} or [::1]:7979), got {text!r}")
    host, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    if not 0 <= int(port) <= 65535:
        raise ValueError(f"port must be 0..65535, got {port}")
    return host, int(port)


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def grpc_target(address: str) -> str:
    """A host:port for gRPC to dial: an IPv6 address gets its brackets (a malformed address is left for
    gRPC to refuse)."""
    try:
        host, port = parse_bind(address)
    except ValueError:
        return address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def checked_bind(value: str) -> str:
    """A bind address setting: validated by `parse_bind`, kept as written (without surrounding blanks)."""
    parse_bind(value)
    return value.strip()


def optional_bind(value: str | None) -> str | None:
    """An optional bind address setting: unset or blank is None, anything else as `checked_bind`."""
    return None if value is None or not value.strip() else checked_bind(value)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A daily time-of-day window [start, end); end < start crosses midnight; start == end is all day."""

    start: time
    end: time

    @classmethod
    def parse(cls, text: str) -> TimeWindow:
        m = re.fullmatch(r"\s*([0-9]{1,2}):([0-9]{2})\s*-\s*([0-9]{1,2}):([0-9]{2})\s*", text)
        if not m:
            raise ValueError(f"time window must look like 01:00-05:00, got {text!r}")
        h1, m1, h2, m2 = map(int, m.groups())
        for h, mi in ((h1, m1), (h2, m2)):
            if not (0 <= h <= 24 and 0 <= mi <= 59) or (h == 24 and mi):
                raise ValueError(f"time window {text!r}: {h:02d}:{mi:02d} is not a time of day")
        end = time(0, 0) if h2 == 24 else time(h2, m2)
        return cls(time(h1 % 24, m1), end)

    def contains(self, t: time) -> bool:
        if self.start == self.end:
            return True
        if self.start < self.end:
            return self.start <= t < self.end
        return t >= self.start or t < self.end

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{self.end:%H:%M}"


def split_list(value: Any) -> Any:
    """Lists may be given as a JSON list, a YAML list, or a comma-separated string (env, .properties)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a valid JSON list: {exc.msg}") from None
            except RecursionError:
                raise ValueError("not a valid JSON list: nested too deeply") from None
        return [p.strip() for p in text.split(",") if p.strip()]
    return value


def one_line(text: str) -> str:
    """`text` with its line breaks made spaces: every error we print is one line."""
    return " ".join(text.split())
