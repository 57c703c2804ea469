"""Configuration from outside: metadata service URIs (and zkTimeout), Java `.properties` text, YAML/JSON
config files and BKAUDIT_* environment variables. Valid input round-trips; anything else is the module's
own error naming the URI, the line, the file or the variable."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st

from auditor.metadata.errors import MetadataConfigError, UnsupportedLayoutError
from auditor.metadata.location import _SERVER, LedgerManager, from_settings, parse_service_uri, zk_path_problem
from auditor.settings import ConfigError, PropertiesError, Settings, load_settings, parse_properties
from auditor.settings.jaas import FLAGS, JaasError, parse_jaas

from .contract import parse_contract
from .strategies import deep_json, json_values, mutated, weird_numbers

# ------------------------------------------------------------------ metadata service URIs

hosts = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z0-9-]{1,8}){0,2}", fullmatch=True),
    st.builds(lambda *o: ".".join(map(str, o)), *[st.integers(0, 255)] * 4),
    st.sampled_from(["[::1]", "[fe80::1%eth0]", "[2001:db8::7]"]),
)
servers = st.builds(lambda h, p: h + (f":{p}" if p else ""), hosts, st.none() | st.integers(1, 65535))
roots = st.lists(
    st.from_regex(r"[A-Za-z0-9_.-]{1,10}", fullmatch=True).filter(lambda n: n not in (".", "..")),
    min_size=1,
    max_size=4,
).map(lambda parts: "/" + "/".join(parts))
KINDS = {
    "zk": None,
    "zk+null": None,
    "zk+hierarchical": LedgerManager.HIERARCHICAL,
    "zk+longhierarchical": LedgerManager.LONG_HIERARCHICAL,
    "zk+flat": LedgerManager.FLAT,
}


@given(st.sampled_from(sorted(KINDS)), st.lists(servers, min_size=1, max_size=3), st.sampled_from([";", ","]), roots)
def test_service_uri_round_trip(scheme: str, hs: list[str], sep: str, root: str) -> None:
    loc = parse_service_uri(f"{scheme}://{sep.join(hs)}{root}")
    assert (loc.zk_hosts, loc.ledgers_root, loc.manager) == (",".join(hs), root, KINDS[scheme])


@st.composite
def hostile_uris(draw: st.DrawFn) -> str:
    valid = f"{draw(st.sampled_from(sorted(KINDS)))}://{draw(servers)}{draw(roots)}"
    kind = draw(st.sampled_from(["mutate", "text", "insert"]))
    if kind == "mutate":
        return draw(mutated(valid.encode())).decode("utf-8", "replace")
    if kind == "text":
        return draw(st.text(max_size=60))
    i = draw(st.integers(0, len(valid)))
    return (
        valid[:i]
        + draw(
            st.sampled_from(
                ["[", "]", "\n", "\t", " ", "\x00", "?", "#", "//", "/..", "@", ":99999", "\u0661", "%", "\ud7ff"]
            )
        )
        + valid[i:]
    )


@given(hostile_uris())
def test_service_uri_hostile(uri: str) -> None:
    out = parse_contract(lambda: parse_service_uri(uri), (MetadataConfigError, UnsupportedLayoutError), names=repr(uri))
    if out.ok:  # accepted: every part is something ZooKeeper (and Java) would take
        loc = out.value
        assert zk_path_problem(loc.ledgers_root) is None and loc.ledgers_root != "/"
        assert all(_SERVER.fullmatch(h) for h in loc.zk_hosts.split(","))


@given(st.one_of(weird_numbers, st.integers(-(2**40), 2**40)))
def test_zk_timeout(value: object) -> None:
    out = parse_contract(
        lambda: from_settings({"zkServers": "h:2181", "zkTimeout": value}), MetadataConfigError, names="zkTimeout"
    )
    if out.ok:
        assert 0 < out.value.session_timeout_ms < 2**31 and out.value.session_timeout_ms == int(str(value).strip())


# ------------------------------------------------------------------ Java .properties

# Keys and values of any BMP text (surrogates aside), written the way Java's Properties.store escapes.
prop_text = st.text(st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",)), max_size=20)


def escape(s: str) -> str:
    out = []
    for c in s:
        if c.isascii() and c.isalnum() or c in "._-/,;@$%^&*()[]{}<>~+?|'\"`":
            out.append(c)
        else:
            out.append(f"\\u{ord(c):04x}")
    return "".join(out)


@given(
    st.dictionaries(prop_text.filter(bool), prop_text, max_size=6),
    st.sampled_from(["=", ": ", " ", " = "]),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_properties_round_trip(props: dict[str, str], sep: str, brk: str) -> None:
    text = brk.join(
        ["# written by the test", "! also a comment"] + [f"{escape(k)}{sep}{escape(v)}" for k, v in props.items()]
    )
    assert parse_properties(text) == props


@given(st.one_of(st.text(max_size=200), st.text("\\u0123abcXYZ=:# \n\t!", max_size=60)))
def test_properties_hostile(text: str) -> None:
    out = parse_contract(lambda: parse_properties(text), PropertiesError, names="line ")
    if out.ok:
        assert all(isinstance(k, str) and isinstance(v, str) and k for k, v in out.value.items())


# ------------------------------------------------------------------ config files and environment variables

_dir = Path(tempfile.mkdtemp(prefix="bk-auditor-config-"))
URI = "zk+hierarchical://127.0.0.1:2181/ledgers"
settings_docs = st.fixed_dictionaries(
    {"metadata_service_uri": st.just(URI)},
    optional={
        "schedule": st.fixed_dictionaries(
            {}, optional={"scrutiny_seconds": st.integers(0, 10**6), "windows": st.just(["01:00-05:00"])}
        ),
        "bookie_client": st.fixed_dictionaries({}, optional={"timeout_seconds": st.floats(0.1, 100)}),
        "max_concurrent_ledgers": st.integers(1, 1000),
        "auditorPeriodicCheckInterval": st.integers(0, 10**6),
    },
)


@given(settings_docs, st.sampled_from([".yaml", ".json"]))
def test_config_file_round_trip(doc: dict, suffix: str) -> None:
    p = _dir / f"ok{suffix}"
    p.write_text(yaml.safe_dump(doc) if suffix == ".yaml" else __import__("json").dumps(doc))
    s = _load(lambda: load_settings(p)).value
    assert s.metadata_service_uri == URI
    if "max_concurrent_ledgers" in doc:
        assert s.max_concurrent_ledgers == doc["max_concurrent_ledgers"]
    if "auditorPeriodicCheckInterval" in doc:
        assert s.schedule.ledger_check_seconds == doc["auditorPeriodicCheckInterval"]


def _load(call):
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.upper().startswith("BKAUDIT_")}
    try:
        return parse_contract(call, ConfigError)
    finally:
        os.environ.update(saved)


@given(
    st.one_of(
        st.binary(max_size=300),
        settings_docs.flatmap(lambda d: mutated(yaml.safe_dump(d).encode())),
        json_values.map(lambda v: yaml.safe_dump(v).encode()),
        deep_json().map(str.encode),
        st.lists(
            st.tuples(
                st.sampled_from(
                    [
                        "zkTimeout",
                        "metadataServiceUri",
                        "schedule.windows",
                        "auditorPeriodicCheckInterval",
                        "bogus",
                        "x\\u12",
                    ]
                ),
                weird_numbers,
            ),
            max_size=4,
        ).map(lambda kv: "\n".join(f"{k}={v}" for k, v in kv).encode("utf-8", "surrogatepass")),
    ),
    st.sampled_from([".yaml", ".json", ".conf", ".properties"]),
)
def test_config_file_hostile(data: bytes, suffix: str) -> None:
    p = _dir / f"hostile{suffix}"
    p.write_bytes(data)
    out = _load(lambda: load_settings(p))
    if not out.ok:
        for line in out.error.problems:
            assert str(p) in line and "\n" not in line, line
    else:
        assert isinstance(out.value, Settings)


ENV_NAMES = [
    "BKAUDIT_METADATA_SERVICE_URI",
    "BKAUDIT_ZOOKEEPER",
    "BKAUDIT_ZOOKEEPER__SESSION_TIMEOUT_SECONDS",
    "BKAUDIT_SCHEDULE__WINDOWS",
    "BKAUDIT_RECHECK__DELAYS_SECONDS",
    "BKAUDIT_MAX_CONCURRENT_LEDGERS",
    "BKAUDIT_ADMIN__BIND",
    "BKAUDIT_LOG__LEVEL",
    "BKAUDIT_ELECTION__PATH",
    "BKAUDIT_SCHEDULE",
]
env_values = st.one_of(
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=60),
    weird_numbers,
    json_values.map(lambda v: __import__("json").dumps(v)),
    deep_json(),
)


@given(st.sampled_from(ENV_NAMES), env_values)
def test_environment_hostile(name: str, value: str) -> None:
    if "\x00" in value:
        return
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.upper().startswith("BKAUDIT_")}
    os.environ[name] = value
    try:
        out = parse_contract(lambda: load_settings(), ConfigError)
    finally:
        del os.environ[name]
        os.environ.update(saved)
    if not out.ok:
        assert any(name in line for line in out.error.problems), out.error.problems
        assert all("\n" not in line for line in out.error.problems)


# ------------------------------------------------------------------ JAAS login configuration files

_jaas_word = st.text("abcXYZ019_.$-", min_size=1, max_size=12)
_jaas_value = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@given(
    st.dictionaries(
        _jaas_word,
        st.lists(
            st.tuples(
                _jaas_word,
                st.sampled_from(sorted(FLAGS)),
                st.dictionaries(_jaas_word, _jaas_value, max_size=3),
            ),
            max_size=3,
        ),
        max_size=3,
    )
)
def test_jaas_round_trip(sections: dict) -> None:
    text = "\n".join(
        f"{name} {{\n"
        + "".join(
            f"  {module} {flag} " + " ".join(f"{k}={_quoted(v)}" for k, v in options.items()) + ";\n"
            for module, flag, options in modules
        )
        + "};"
        for name, modules in sections.items()
    )
    parsed = parse_jaas(text, "jaas.conf")
    assert {n: [(m.name, m.flag, m.options) for m in ms] for n, ms in parsed.items()} == sections


@given(st.one_of(st.text(max_size=200), st.text('Client{}=;"\\/* \nabc', max_size=80)))
def test_jaas_hostile(text: str) -> None:
    parse_contract(lambda: parse_jaas(text, "jaas.conf"), JaasError, names="jaas.conf")
