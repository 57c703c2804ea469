"""A frozen, slotted dataclass copied with some fields changed, field by field.

`dataclasses.replace` builds the copy through `__init__` again (its checks and defaults) and costs about
three times as much. `Finding.copy_with` runs for nearly every finding of a scan (confirming it; the
daemon's store keeping it), so it reads every field at once and writes each slot past the frozen
`__setattr__` instead. That builds the object `replace` builds for a dataclass whose `__init__` only
stores its fields (no `__post_init__`, no `InitVar`, no `init=False` field), which is all this is for.

An optimisation only: `dataclasses.replace(obj, **changes)` is the clear path and gives an equal object.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["slot_copier"]

D = TypeVar("D", bound="DataclassInstance")


def slot_copier(cls: type[D]) -> Callable[[D, Mapping[str, Any]], D]:
    """`copy(obj, changes)` for instances of `cls` (a frozen dataclass with slots): `obj` with `changes`
    (field names, values as stored); TypeError for a name that is not a field."""
    names = tuple(f.name for f in fields(cls))
    name_set = frozenset(names)
    values = operator.attrgetter(*names)  # every field, read at once
    slots = tuple(cast(Any, cls.__dict__[name]).__set__ for name in names)  # each slot's writer

    def copy(obj: D, changes: Mapping[str, Any]) -> D:
        if not changes.keys() <= name_set:
            raise TypeError(f"{cls.__name__} has no field {sorted(changes.keys() - name_set)[0]!r}")
        new = object.__new__(cls)
        for name, put, value in zip(names, slots, values(obj)):
            put(new, changes[name] if name in changes else value)
        return new

    return copy
