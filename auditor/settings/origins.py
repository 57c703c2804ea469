"""Where each value came from (command line, environment, config file) and how a validation error is
worded: every problem is one line that names the setting as it was written and where, e.g.
`config file /etc/x.yaml: auditorPeriodicCheckInterval: must be >= 0, got -5`."""

from __future__ import annotations

import difflib
import functools
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .model import ENV_PREFIX, Settings, flatten, our_names


@dataclass
class Origin:
    """Where a value came from, for error messages."""

    where: str  # "config file /x.yaml", "environment", "command line"
    name: str  # the key as the user wrote it
    raw: Any = None  # the value as written (before unit conversion)

    def label(self) -> str:
        return f"{self.where}: {self.name}"


def environment_origins(origins: dict[str, Origin]) -> None:
    """Record, by dotted name, the `BKAUDIT_*` variables that set something (a setting or a whole section)."""
    env = {k.upper(): v for k, v in os.environ.items() if k.upper().startswith(ENV_PREFIX)}
    for dotted in our_names():
        parts = dotted.split(".")
        name = ENV_PREFIX + "__".join(parts).upper()
        if name in env:
            origins[dotted] = Origin("environment", name, env[name])
            continue
        for i in range(1, len(parts)):  # a whole section given as JSON
            sec = ENV_PREFIX + "__".join(parts[:i]).upper()
            if sec in env:
                origins.setdefault(".".join(parts[:i]), Origin("environment", sec, env[sec]))


def setting_variables() -> tuple[set[str], set[str]]:
    """The `BKAUDIT_*` names that set something: (every setting, every section given as JSON)."""
    leaves: set[str] = set()
    sections: set[str] = set()
    for dotted in our_names():
        parts = dotted.upper().split(".")
        leaves.add(ENV_PREFIX + "__".join(parts))
        sections.update(ENV_PREFIX + "__".join(parts[:i]) for i in range(1, len(parts)))
    return leaves, sections


def unknown_variables(other_names: Iterable[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """One problem per `BKAUDIT_*` variable that names no setting (nor one of `other_names`), named as the
    user wrote it: pydantic-settings would silently ignore a misspelt top-level one."""
    env = os.environ if environ is None else environ
    leaves, sections = setting_variables()
    leaves |= {n.upper() for n in other_names}
    problems = []
    for name in sorted(env):
        if name.upper().startswith(ENV_PREFIX) and name.upper() not in leaves | sections:
            problems.append(f"environment: {name}: unknown setting{_hint(name.upper(), leaves, sections)}")
    return problems


def _hint(name: str, leaves: set[str], sections: set[str]) -> str:
    """Within a known section: the closest of its settings, else the list of them. Otherwise the closest
    name overall, if one is close."""
    section, _, leaf = name.rpartition("__")
    if section in sections:
        inside = sorted({n[len(section) + 2 :] for n in leaves if n.startswith(section + "__")} - {""})
        inside = [n for n in inside if "__" not in n]
        close = difflib.get_close_matches(leaf, inside, n=1, cutoff=0.75)
        if close:
            return f" (did you mean {section}__{close[0]}?)"
        return f" ({section} has: {', '.join(inside)})"
    close = difflib.get_close_matches(name, sorted(leaves | sections), n=1, cutoff=0.8)
    return f" (did you mean {close[0]}?)" if close else ""


def command_line_origins(
    kwargs: Mapping[str, Any], origins: dict[str, Origin], option_names: Mapping[str, str]
) -> None:
    """Record, by dotted name, the command-line flags that set something (`option_names`: name -> flag)."""
    for dotted, value in flatten(kwargs).items():
        origins[dotted] = Origin("command line", option_names.get(dotted, dotted), value)


def origin_for(loc: tuple[Any, ...], stacks: list[dict[str, Origin]]) -> Origin | None:
    """Where the value at pydantic's error location `loc` came from (the innermost recorded name)."""
    parts = [str(p) for p in loc if not isinstance(p, int)]
    for origins in stacks:  # highest precedence first
        for i in range(len(parts), 0, -1):
            hit = origins.get(".".join(parts[:i]))
            if hit is not None:
                return hit
    return None


def _num(x: Any) -> Any:
    return int(x) if isinstance(x, float) and x.is_integer() else x


@functools.cache
def secret_names() -> frozenset[str]:
    """The dotted names of the settings declared secret (`Field(repr=False)`): never shown in a message."""
    names: set[str] = set()

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, f in model.model_fields.items():
            ann = f.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
            elif not f.repr:
                names.add(prefix + name)

    walk(Settings, "")
    return frozenset(names)


def describe(err: Mapping[str, Any], raw: Any, *, secret: bool = False) -> str:
    """One pydantic error in our words, showing the value as it was written (`raw`) where known; a
    `secret` setting's value is never shown."""
    kind = err.get("type", "")
    ctx = {k: _num(v) for k, v in (err.get("ctx") or {}).items()}
    got = raw if raw is not None else err.get("input")
    if secret:
        shown: Any = "a value not shown (a secret)"
    elif isinstance(got, (int, float)) and not isinstance(got, bool):
        shown = _num(got)
    elif isinstance(got, str) and re.fullmatch(r"-?\d+(\.\d+)?", got.strip()):
        shown = got.strip()  # a number as written in a file or variable: show it as a number
    else:
        shown = repr(got)
    if kind == "greater_than_equal":
        return f"must be >= {ctx.get('ge')}, got {shown}"
    if kind == "greater_than":
        return f"must be > {ctx.get('gt')}, got {shown}"
    if kind == "less_than_equal":
        return f"must be <= {ctx.get('le')}, got {shown}"
    if kind == "less_than":
        return f"must be < {ctx.get('lt')}, got {shown}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be an integer, got {shown}"
    if kind in ("float_parsing", "float_type"):
        return f"must be a number, got {shown}"
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false, got {shown}"
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected')}, got {shown}"
    if kind == "extra_forbidden":
        return "unknown setting"
    if kind in ("list_type",):
        return f"must be a list, got {shown}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a section (a mapping of settings), got {shown}"
    msg = str(err.get("msg", "invalid"))
    return msg.removeprefix("Value error, ")
