"""Bad configuration through the real `bk-auditor` console script (a subprocess, as an operator runs it):
exit code 2 and exactly one line on stderr naming the file, key, variable or option. Nothing here reaches
ZooKeeper: every case fails while the settings are loaded."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).with_name("bk-auditor")
URI = "zk+hierarchical://127.0.0.1:2181/ledgers"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    full.update(env or {})
    return subprocess.run(
        [str(BIN), *args], capture_output=True, text=True, env=full, timeout=60, stdin=subprocess.DEVNULL
    )


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])
    return lines[0]


FILES: list[tuple[str, bytes, str]] = [
    ("nonutf8.conf", b"metadataServiceUri=zk://h:1/l\xff\n", "not UTF-8 text (byte 0xff on line 1)"),
    ("nonutf8.yaml", b"metadata_service_uri: \xfe\n", "not UTF-8 text"),
    ("shortu.conf", b"zkServers=h:1\nmetadataServiceUri=zk://h:1/l\\u12\n", "line 2: malformed \\uxxxx escape"),
    ("badzkto.conf", b"metadataServiceUri=" + URI.encode() + b"\nzkTimeout=abc\n", "zkTimeout: must be an integer"),
    ("ipv6.conf", b"metadataServiceUri=zk://[::1/ledgers\n", "metadataServiceUri: metadata service uri"),
    ("deep.yaml", b"a: " + b"[" * 3000 + b"]" * 3000 + b"\n", "nested deeper than 64 levels"),
    ("hugeint.yaml", b"max_concurrent_ledgers: " + b"9" * 5000 + b"\n", "unreadable value"),
    ("nul.yaml", b"log:\n  level: '\x00'\n", "not valid YAML (line 2)"),
    (
        "sasl.conf",
        b"metadataServiceUri=" + URI.encode() + b"\nclientAuthProviderFactoryClass="
        b"org.apache.bookkeeper.sasl.SASLClientProviderFactory\n",
        "clientAuthProviderFactoryClass: bookie authentication plugin",
    ),
    (
        "tlsprovider.conf",
        b"metadataServiceUri=" + URI.encode() + b"\ntlsProvider=wolfSSL\n",
        "tlsProvider: unsupported TLS provider 'wolfSSL'",
    ),
    (
        "election.yaml",
        b"metadata_service_uri: " + URI.encode() + b"\nelection:\n  path: /elsewhere\n",
        "election.path: election path /elsewhere is outside",
    ),
]


# Every file with `check`; the first three also with `run` and `sweep` (the same loader: one process each).
CASES = [("check", *f) for f in FILES] + [(c, *f) for c in ("run", "sweep") for f in FILES[:3]]


@pytest.mark.parametrize("command, name, data, words", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_bad_config_file(tmp_path: Path, command: str, name: str, data: bytes, words: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    line = one_error_line(run(command, "--config", str(path)))
    assert str(path) in line and words in line, line


@pytest.mark.parametrize(
    "uri, words",
    [
        ("zk+hierarchical://[::1/ledgers", "Invalid IPv6 URL"),
        ("zk+hierarchical://h:99999/ledgers", "port 99999"),
        ("zk+hierarchical://h:2181/led\tgers", "invalid character"),
        ("zk+hierarchical://h:2181/ledgers/..", "relative part"),
    ],
)
def test_bad_uri_flag(uri: str, words: str) -> None:
    line = one_error_line(run("check", "--metadata-service-uri", uri))
    assert line.startswith("error: command line: --metadata-service-uri: ") and words in line, line


@pytest.mark.parametrize(
    "env, words",
    [
        ({"BKAUDIT_METADATA_SERVICE_URI": "zk://[::1/l"}, "environment: BKAUDIT_METADATA_SERVICE_URI: "),
        (
            {"BKAUDIT_METADATA_SERVICE_URI": URI, "BKAUDIT_ZOOKEEPER": '{"servers": ' + "[" * 5000 + "]" * 5000 + "}"},
            "BKAUDIT_ZOOKEEPER: JSON nested too deeply",
        ),
        (
            {"BKAUDIT_METADATA_SERVICE_URI": URI, "BKAUDIT_SCHEDULE__WINDOWS": "[" * 5000 + "]" * 5000},
            "BKAUDIT_SCHEDULE__WINDOWS",
        ),
        (
            {"BKAUDIT_METADATA_SERVICE_URI": URI, "BKAUDIT_MAX_CONCURRENT_LEDGERS": "9" * 5000},
            "BKAUDIT_MAX_CONCURRENT_LEDGERS",
        ),
        ({"BKAUDIT_METADATA_SERVICE_URI": URI, "BKAUDIT_ADMIN__BIND": "127.0.0.1:\u0667\u0669"}, "BKAUDIT_ADMIN__BIND"),
    ],
)
def test_bad_environment(env: dict[str, str], words: str) -> None:
    line = one_error_line(run("check", env=env))
    assert words in line, line


@pytest.mark.parametrize(
    "name, words",
    [
        # pydantic-settings alone ignores an unknown top-level variable and names a nested one by its
        # dotted setting (schedule.foo): the user wrote neither.
        ("BKAUDIT_METADATA_SERVICE_UR", "did you mean BKAUDIT_METADATA_SERVICE_URI?"),
        ("BKAUDIT_TOTALLY_UNRELATED", "unknown setting"),
        ("BKAUDIT_RECHECK__ATTEMPT", "did you mean BKAUDIT_RECHECK__ATTEMPTS?"),
        ("bkaudit_log__levl", "did you mean BKAUDIT_LOG__LEVEL?"),
        ("BKAUDIT_ZOOKEEPER__TIMEOUT", "BKAUDIT_ZOOKEEPER has: "),
    ],
)
def test_unknown_environment_variable_is_named_as_written(name: str, words: str) -> None:
    result = run("check", env={"BKAUDIT_METADATA_SERVICE_URI": URI, name: "1"})
    line = one_error_line(result)
    assert line.startswith(f"error: environment: {name}: unknown setting"), line
    assert words in line, line


@pytest.mark.parametrize(
    "args, words",
    [
        (["sweep", "--metadata-service-uri", URI, "--start", "9" * 5000], "is outside 0..2^63-1"),
        (["sweep", "--metadata-service-uri", URI, "--end", "1:" + "9" * 30], "is outside 0..2^63-1"),
        (["explain", "9" * 5000, "--admin", "127.0.0.1:1"], "is outside 0..2^63-1"),
        (["findings", "--ledger", "\u0661", "--admin", "127.0.0.1:1"], "cannot parse ledger id"),
    ],
)
def test_bad_ledger_ids_on_the_command_line(args: list[str], words: str) -> None:
    line = one_error_line(run(*args))
    assert words in line and len(line) < 300, line


def test_an_error_after_settings_has_the_same_prefix() -> None:
    line = one_error_line(run("check", "--checks", "nope", env={"BKAUDIT_METADATA_SERVICE_URI": URI}))
    assert line.startswith("error: unknown check 'nope'; choose from scrutiny, ledger, open"), line


def test_an_unreachable_zookeeper_is_one_line_naming_the_servers() -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"zk+hierarchical://127.0.0.1:{port};[::1]:{port}/ledgers"
    r = run("check", env={"BKAUDIT_METADATA_SERVICE_URI": uri, "BKAUDIT_ZOOKEEPER__CONNECT_TIMEOUT_SECONDS": "1"})
    assert one_error_line(r) == (
        f"error: cannot reach ZooKeeper at 127.0.0.1:{port},[::1]:{port} within 1s (zookeeper.connect_timeout_seconds)"
    )


@pytest.mark.parametrize("fmt, json_logs", [("table", False), ("json", True), (None, True)])
def test_logs_follow_the_output_format(tmp_path: Path, fmt: str | None, json_logs: bool) -> None:
    # --format table asks for people: console lines. json, or no choice with stderr not a terminal: JSON.
    conf = tmp_path / "auditor.yaml"
    conf.write_text("zookeeper:\n  connect_timeout_seconds: 0.2\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["check", "-c", str(conf), "--metadata-service-uri", f"zk+hierarchical://127.0.0.1:{port}/ledgers"]
    r = run(*args, *(["--format", fmt] if fmt else []))
    [log_line] = [line for line in r.stderr.splitlines() if "config file read" in line]
    assert log_line.startswith("{") is json_logs, log_line
    assert r.stderr.splitlines()[-1].startswith("error: cannot reach ZooKeeper")
    r = run(*args, "--log-format", "json", *(["--format", fmt] if fmt else []))  # an explicit choice wins
    assert [line for line in r.stderr.splitlines() if "config file read" in line][0].startswith("{")


@pytest.mark.parametrize(
    "args, env, line",
    [
        # gRPC alone took a bare host as port 443 and said only "unreachable".
        (
            ["status", "--admin", "example.com"],
            {},
            "error: command line: --admin: must be host:port (e.g. 127.0.0.1:7979 or [::1]:7979), got 'example.com'",
        ),
        (["findings", "--admin", "[::1]:0"], {}, "error: command line: --admin: the port must be 1..65535, got 0"),
        (
            ["status"],
            {"BKAUDIT_ADMIN_ADDRESS": "10.0.0.1"},
            "error: environment: BKAUDIT_ADMIN_ADDRESS: must be host:port (e.g. 127.0.0.1:7979 or [::1]:7979), "
            "got '10.0.0.1'",
        ),
    ],
)
def test_admin_address_is_validated(args: list[str], env: dict[str, str], line: str) -> None:
    assert one_error_line(run(*args, env=env)) == line
