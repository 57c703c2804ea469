"""The admin API's TLS settings: what they accept, and each misconfiguration named in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.settings import ConfigError, load_settings

pytestmark = pytest.mark.usefixtures("no_bkaudit_env")


def _problems(tmp_path: Path, admin: str) -> list[str]:
    f = tmp_path / "c.yaml"
    f.write_text(f"metadata_service_uri: zk+hierarchical://127.0.0.1:2181/ledgers\nadmin:\n{admin}")
    with pytest.raises(ConfigError) as exc:
        load_settings(f)
    return [p.removeprefix(f"config file {f}: ") for p in exc.value.problems]


@pytest.fixture
def pem(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name in ("cert", "key", "ca"):
        out[name] = tmp_path / f"{name}.pem"
        out[name].write_text("x")
    return out


def test_full_admin_tls_settings_load(tmp_path: Path, pem: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        "admin:\n"
        f"  tls_cert: {pem['cert']}\n  tls_key: {pem['key']}\n  tls_client_ca: {pem['ca']}\n"
        "  authorized_clients: [dns:ops, 'uri:spiffe://td/sa/toolset']\n  probe_bind: 10.0.0.7:7980\n"
    )
    monkeypatch.setenv("BKAUDIT_ADMIN__UNAUTHENTICATED_READS", "true")
    monkeypatch.setenv("BKAUDIT_ADMIN__BIND", "10.0.0.7:7979")
    a = load_settings(f).admin
    assert a.tls_client_ca == pem["ca"] and a.authorized_clients == ["dns:ops", "uri:spiffe://td/sa/toolset"]
    assert a.probe_bind == "10.0.0.7:7980" and a.unauthenticated_reads and a.bind == "10.0.0.7:7979"
    monkeypatch.setenv("BKAUDIT_ADMIN__AUTHORIZED_CLIENTS", "dns:A, cn:b")
    assert load_settings(f).admin.authorized_clients == ["dns:a", "cn:b"]


def test_client_ca_needs_server_tls(tmp_path: Path, pem: dict[str, Path]) -> None:
    assert _problems(tmp_path, f"  tls_client_ca: {pem['ca']}\n") == [
        "admin.tls_client_ca: client certificates need admin TLS: set admin.tls_cert and admin.tls_key too"
    ]


def test_missing_client_ca_file_is_named(tmp_path: Path, pem: dict[str, Path]) -> None:
    got = _problems(
        tmp_path, f"  tls_cert: {pem['cert']}\n  tls_key: {pem['key']}\n  tls_client_ca: {tmp_path}/nope.pem\n"
    )
    assert got == [f"admin.tls_client_ca: {tmp_path}/nope.pem: no such file"]


def test_authorized_clients_need_a_client_ca(tmp_path: Path, pem: dict[str, Path]) -> None:
    got = _problems(tmp_path, f"  tls_cert: {pem['cert']}\n  tls_key: {pem['key']}\n  authorized_clients: [dns:ops]\n")
    assert len(got) == 1 and got[0].startswith("admin.authorized_clients: names client certificates")


def test_probe_bind_must_be_an_address_of_its_own(tmp_path: Path) -> None:
    assert _problems(tmp_path, "  bind: 127.0.0.1:7979\n  probe_bind: 127.0.0.1:7979\n") == [
        "admin.probe_bind: must differ from admin.bind (127.0.0.1:7979)"
    ]
    got = _problems(tmp_path, "  probe_bind: nowhere\n")
    assert len(got) == 1 and got[0].startswith("admin.probe_bind: must be host:port")
