"""How a command reaches a running daemon's admin API: the address (--admin, else the environment, else
the default), the client's TLS material (--tls-* flags or their variables), and the one call that turns an
unreachable daemon or a refused call into one line on stderr and exit code 2."""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from auditor.cli.common import exit_on_error, fail
from auditor.settings.clientenv import ENV_CLI_TLS_CA, ENV_CLI_TLS_CERT, ENV_CLI_TLS_KEY, ENV_CLI_TLS_SERVER_NAME

if TYPE_CHECKING:  # annotations only: the commands import what they need when they run
    from auditor.admin.client import AdminClient

T = TypeVar("T")

# The admin client's TLS material: flags, else these environment variables (the chart sets them in the
# pod, so `kubectl exec ... bk-auditor status` authenticates like any named client).
TlsCaOpt = Annotated[
    Path | None,
    typer.Option("--tls-ca", envvar=ENV_CLI_TLS_CA, help="CA certificate of the admin API's TLS certificate (PEM)."),
]
TlsCertOpt = Annotated[
    Path | None,
    typer.Option(
        "--tls-cert",
        envvar=ENV_CLI_TLS_CERT,
        help="Client certificate (PEM) when the admin API requires one (admin.tls_client_ca).",
    ),
]
TlsKeyOpt = Annotated[
    Path | None, typer.Option("--tls-key", envvar=ENV_CLI_TLS_KEY, help="The client certificate's key (PEM).")
]
TlsServerNameOpt = Annotated[
    str | None,
    typer.Option(
        "--tls-server-name",
        envvar=ENV_CLI_TLS_SERVER_NAME,
        help="Name to check the server's certificate against, when it differs from the --admin host.",
    ),
]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds to wait for the daemon.")]


_warned: set[str] = set()  # warnings already shown by this process


def _admin_address(flag: str | None) -> str:
    """--admin, else the environment (warning once about the deprecated name), else the default."""
    from auditor.settings import DEFAULT_ADMIN_ADDRESS, admin_address_from_environment
    from auditor.settings.load import ENV_ADMIN_ADDRESS, ENV_ADMIN_ADDRESS_DEPRECATED

    if flag is not None:
        return _checked_admin(flag, "command line: --admin")
    address, warning = admin_address_from_environment()
    if warning is not None and warning not in _warned:
        _warned.add(warning)
        typer.echo(f"warning: {warning}", err=True)
    if address is None:
        return DEFAULT_ADMIN_ADDRESS
    name = ENV_ADMIN_ADDRESS if (os.environ.get(ENV_ADMIN_ADDRESS) or "").strip() else ENV_ADMIN_ADDRESS_DEPRECATED
    return _checked_admin(address, f"environment: {name}")


def _checked_admin(address: str, source: str) -> str:
    """host:port or [v6]:port with a port 1..65535, else exit 2 naming where it came from (gRPC would
    otherwise take a bare host as port 443, and a typo would show up only as "unreachable")."""
    from auditor.settings import parse_bind
    from auditor.settings.values import grpc_target

    try:
        _, port = parse_bind(address)
    except ValueError as exc:
        fail(f"{source}: {exc}")
    if port == 0:
        fail(f"{source}: the port must be 1..65535, got 0")
    return grpc_target(address)  # an IPv6 pod IP without brackets ($(POD_IP):7979) gets them


@dataclass(frozen=True)
class ClientTls:
    """The admin client's TLS material (the --tls-* options of one command)."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    server_name: str | None = None


NO_TLS = ClientTls()
_TLS_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("tls_ca", TlsCaOpt),
    ("tls_cert", TlsCertOpt),
    ("tls_key", TlsKeyOpt),
    ("tls_server_name", TlsServerNameOpt),
)


def with_client_tls(fn: Callable[..., T]) -> Callable[..., T]:
    """Give an admin-client command the --tls-* options (or their variables, auditor.settings.clientenv), handed to
    it as one `tls` argument: one definition for every command instead of four parameters in each."""
    sig = inspect.signature(fn, eval_str=True)
    params = [p for p in sig.parameters.values() if p.name != "tls"]
    params += [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=a) for n, a in _TLS_OPTIONS
    ]

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> T:
        return fn(*args, tls=ClientTls(*(kwargs.pop(n) for n, _ in _TLS_OPTIONS)), **kwargs)

    command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params} | {"return": sig.return_annotation}
    return command


def client_call(admin: str | None, tls: ClientTls, timeout: float, call: Callable[[AdminClient], Awaitable[T]]) -> T:
    from auditor.admin.client import AdminClient

    admin = _admin_address(admin)

    async def go() -> T:
        async with AdminClient(
            admin,
            timeout=timeout,
            tls_ca=tls.ca,
            tls_cert=tls.cert,
            tls_key=tls.key,
            tls_server_name=tls.server_name,
        ) as client:
            return await call(client)

    for flag, path in (("--tls-ca", tls.ca), ("--tls-cert", tls.cert), ("--tls-key", tls.key)):
        if path is not None and not path.is_file():
            fail(f"{flag} {path}: no such file")
    with exit_on_error():
        return asyncio.run(go())


def check_format(fmt: str) -> None:
    if fmt not in ("table", "json"):
        fail(f"--format must be table or json, got {fmt!r}")
