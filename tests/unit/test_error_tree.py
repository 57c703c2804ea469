"""The one error tree (auditor/errors.py): every error class of ours hangs under `AuditorError`, none is an
AssertionError, no two share a name; the CLI's exit codes and the admin API's statuses come from their
one table each."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import grpc
import pytest

import auditor
from auditor import errors
from auditor.admin.client import AdminClientError
from auditor.admin.errors import LedgerNotFoundError, NotSupportedError, StandbyError, UnknownCheckError, status_of
from auditor.bookie.protocol import FrameError, ProtocolError, UnsafeRequestError
from auditor.cli.common import exit_code
from auditor.durability.entry import EntryFormatError
from auditor.durability.entrylist import EntryListError
from auditor.durability.ids import LedgerIdError
from auditor.metadata.errors import NoSuchLedgerError, NotLeaderError


def _error_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(auditor.__path__, "auditor."):
        if info.name.startswith("auditor._proto"):
            continue  # generated code
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_error_class_of_ours_is_in_the_tree() -> None:
    classes = _error_classes()
    assert len(classes) > 15
    outside = [_name(c) for c in classes if not issubclass(c, errors.AuditorError)]
    assert outside == []


def test_no_error_class_is_an_assertion_error() -> None:
    assert [_name(c) for c in _error_classes() if issubclass(c, AssertionError)] == []


def test_no_two_error_classes_share_a_name() -> None:
    by_name: dict[str, list[str]] = {}
    for c in _error_classes():
        by_name.setdefault(c.__name__, []).append(_name(c))
    assert {n: where for n, where in by_name.items() if len(where) > 1} == {}


@pytest.mark.parametrize(
    ("cls", "branch"),
    [
        (LedgerIdError, errors.DataError),
        (EntryListError, errors.DataError),
        (EntryFormatError, errors.DataError),
        (NotLeaderError, errors.MetadataError),
        (NoSuchLedgerError, errors.MetadataError),
        (ProtocolError, errors.BookieError),
        (FrameError, errors.BookieError),
        (UnsafeRequestError, errors.BookieError),
        (StandbyError, errors.AdminError),
        (AdminClientError, errors.AdminError),
    ],
)
def test_branches(cls: type[BaseException], branch: type[BaseException]) -> None:
    assert issubclass(cls, branch)


def test_data_errors_stay_value_errors() -> None:
    """Parsers' callers catch ValueError (e.g. int() overflow beside LedgerIdError)."""
    assert issubclass(LedgerIdError, ValueError) and issubclass(EntryListError, ValueError)


def test_the_admin_status_table() -> None:
    assert status_of(StandbyError("a")) is grpc.StatusCode.FAILED_PRECONDITION
    assert status_of(NotLeaderError("vote gone")) is grpc.StatusCode.FAILED_PRECONDITION
    assert status_of(UnknownCheckError("x")) is grpc.StatusCode.NOT_FOUND
    assert status_of(LedgerNotFoundError("x")) is grpc.StatusCode.NOT_FOUND
    assert status_of(NoSuchLedgerError("/ledgers/L0007")) is grpc.StatusCode.NOT_FOUND
    assert status_of(KeyError("x")) is grpc.StatusCode.NOT_FOUND
    assert status_of(LedgerIdError("x")) is grpc.StatusCode.INVALID_ARGUMENT
    assert status_of(NotSupportedError("x")) is grpc.StatusCode.UNIMPLEMENTED
    assert status_of(errors.AdminError("x")) is grpc.StatusCode.INTERNAL
    assert status_of(RuntimeError("a bug")) is None


def test_the_cli_exit_code_table() -> None:
    for exc in (
        errors.ConfigError("x"),
        LedgerIdError("x"),
        NotLeaderError("x"),
        UnsafeRequestError("x"),
        AdminClientError("x"),
        ValueError("x"),
    ):
        assert exit_code(exc) == 2, exc
    assert exit_code(RuntimeError("a bug")) is None


def test_error_line_is_one_prefixed_line() -> None:
    from auditor.errors import error_line

    assert error_line(errors.ConfigError(["a: bad", "b:\nworse"])) == "error: a: bad; b:\\nworse"
    assert error_line(TimeoutError("no answer\n  in 3s")) == "error: TimeoutError: no answer in 3s"
    assert error_line("cannot write /x:\tfull") == "error: cannot write /x: full"
