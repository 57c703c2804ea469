"""Our Java-properties reader against the maintained parsers on PyPI (issue 15: "a maintained
Java-properties parser ... if they fit"). A plain script, not a test:

    python -m bench.bench_properties [lines]          (from the repository root)

The candidates are not dependencies of bk-auditor; install them to run this (`pip install jproperties
javaproperties`). For each parser:

1. fit: our own property tests (tests/property/test_config_sources.py: Java-escaped keys and values of any
   BMP text with every separator and line break Java reads; hostile input must either parse or fail with
   an error naming the line) run against an adapter of the candidate, plus the cases our callers rely on
   (continuations, `key value`, a malformed `\\uXXXX` refused with its line);
2. speed: parse time of one large bookkeeper.conf-like file (comment blocks, `key=value`, continuations,
   escapes), best of several runs, as a ratio to ours, all in this one run.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any

from auditor.settings.properties import PropertiesError, parse_properties

Parser = Callable[[str], dict[str, str]]


def _jproperties(text: str) -> dict[str, str]:
    import jproperties

    p = jproperties.Properties()
    try:
        p.load(text)
    except jproperties.ParseError as exc:  # the adapter maps its error to ours, so the contract can judge it
        raise PropertiesError(str(exc)) from None
    return {k: v.data for k, v in p.items()}


def _javaproperties(text: str) -> dict[str, str]:
    import javaproperties

    try:
        return dict(javaproperties.loads(text))
    except javaproperties.InvalidUEscapeError as exc:
        raise PropertiesError(str(exc)) from None


PARSERS: dict[str, Parser] = {"ours": parse_properties, "jproperties": _jproperties, "javaproperties": _javaproperties}

# Cases our callers rely on, with what Java's Properties.load gives (None: Java refuses the text), except
# that a value's unescaped trailing white space is dropped, as ours does (tests/unit/settings/
# test_config.py; a candidate keeping it, as java.util.Properties does, is a difference to adapt).
CASES: list[tuple[str, dict[str, str] | None]] = [
    ("a=1\nb: 2\nc 3\n", {"a": "1", "b": "2", "c": "3"}),
    ("zkServers=zk1:2181,\\\n    zk2:2181\n", {"zkServers": "zk1:2181,zk2:2181"}),
    ("k\\:ey=v\\=1\\u00e9\n", {"k:ey": "v=1é"}),
    ("# c\n! c\n  x = y  \n", {"x": "y"}),  # ours drops a value's trailing blanks (test_config.py)
    ("a=1\\\\\nb=2\n", {"a": "1\\", "b": "2"}),
    ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
    ("x=\\u00zz\n", None),  # Java: IllegalArgumentException (Malformed \uxxxx encoding)
]


def conformance(name: str, parse: Parser) -> list[str]:
    import tests.property.test_config_sources as props

    problems: list[str] = []
    for text, want in CASES:
        try:
            got: Any = parse(text)
        except PropertiesError as exc:
            got = None
            if want is None and "line" not in str(exc):
                problems.append(f"{text!r}: refused without naming the line ({exc})")
        except Exception as exc:  # any other error is a failure to fit
            got = f"{type(exc).__name__}: {exc}"
        if got != want:
            problems.append(f"{text!r}: got {got!r}, Java gives {want!r}")
    original = props.parse_properties
    props.parse_properties = parse  # our own property tests, run against the candidate
    try:
        for test in (props.test_properties_round_trip, props.test_properties_hostile):
            try:
                test()
            except BaseException as exc:  # hypothesis re-raises the falsifying example's failure(s)
                for e in getattr(exc, "exceptions", [exc]):
                    problems.append(f"{test.__name__}: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}")
    finally:
        props.parse_properties = original
    return problems


def big_conf(lines: int) -> str:
    """A bookkeeper.conf-like text: comment blocks, settings, continuations, unicode escapes."""
    out: list[str] = []
    i = 0
    while len(out) < lines:
        out += [
            "#############################################################################",
            f"## Section {i}: what the settings below do, as bk_server.conf explains them",
            "#############################################################################",
            "",
            f"# The setting number {i}, its default and why one would change it.",
            f"setting{i}.name=value-{i}",
            f"setting{i}.servers=zk1:2181,\\",
            "    zk2:2181,\\",
            "    zk3:2181",
            f"setting{i}.path = /ledgers/caf\\u00e9/{i}",
            f"setting{i}.flag true",
            f"#setting{i}.disabled=1",
        ]
        i += 1
    return "\n".join(out) + "\n"


def timed(parse: Parser, text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        parse(text)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lines", nargs="?", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    text = big_conf(args.lines)
    reference = parse_properties(text)
    print(f"one bookkeeper.conf-like file: {text.count(chr(10))} lines, {len(reference)} settings")
    best = {name: float("inf") for name in PARSERS}
    for _ in range(args.repeat):  # interleaved, so a slower moment of the machine hits every parser alike
        for name, parse in PARSERS.items():
            best[name] = min(best[name], timed(parse, text, 1))
    ours = best["ours"]
    for name, parse in PARSERS.items():
        problems = conformance(name, parse)
        try:
            same = parse(text) == reference
        except Exception as exc:
            same = False
            problems.append(f"the big file: {type(exc).__name__}: {exc}")
        t = best[name]
        print(
            f"{name:15s} parse {t * 1000:8.1f} ms  ratio to ours {t / ours:5.2f}  same result {same!s:5s}  "
            f"fit: {'yes' if not problems else f'no ({len(problems)} problems)'}"
        )
        for p in problems:
            print(f"    - {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
