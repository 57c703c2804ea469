"""Reading one config file (YAML/JSON, or Java `.properties`/`.conf` such as bk_server.conf) into our
nested settings tree: Java keys translated once (`JAVA_KEYS`), other BookKeeper keys set aside as ignored,
anything else an error with a suggestion."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from auditor.errors import ConfigError
from auditor.files import safeyaml

from .javakeys import (
    BOOKIE_SECURITY_KEYS,
    CHECKED_JAVA_KEYS,
    JAVA_KEYS,
    JAVA_PRECEDENCE,
    SCRUTINY_KEYS,
    is_known_java_key,
    translate_bookie_security,
)
from .model import flatten, is_our_path, our_names, set_path
from .origins import Origin
from .properties import PropertiesError, parse_properties
from .values import one_line


def _read_file(path: Path) -> dict[str, Any]:
    """The file's keys as a flat {key: value} dict (our sections flattened to dotted names)."""
    where = f"config file {path}"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{where}: not UTF-8 text (byte {raw[exc.start]:#04x} on line {line})") from None
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        try:
            data = safeyaml.load(text)
        except yaml.reader.ReaderError as exc:  # a character YAML does not allow, e.g. NUL
            line = text[: exc.position].count("\n") + 1
            raise ConfigError(
                f"{where}: not valid YAML (line {line}): character {chr(exc.character)!r} is not allowed"
            ) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where_in = f" (line {mark.line + 1})" if mark is not None else ""
            raise ConfigError(
                f"{where}: not valid YAML{where_in}: {one_line(str(getattr(exc, 'problem', None) or exc))}"
            ) from None
        except ValueError as exc:  # e.g. an integer of thousands of digits
            raise ConfigError(f"{where}: unreadable value: {one_line(str(exc))[:200]}") from None
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: must be a mapping of settings, got {type(data).__name__}")
        return flatten(data)
    try:
        return parse_properties(text)
    except PropertiesError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def translate_file(path: Path, origins: dict[str, Origin]) -> tuple[dict[str, Any], list[str]]:
    """Our nested dict from a config file, plus the BookKeeper keys that were ignored."""
    where = f"config file {path}"
    flat = _read_file(path)
    problems: list[str] = []
    ignored: list[str] = []
    tree: dict[str, Any] = {}
    given: dict[str, str] = {}  # our path -> the key that set it

    def put(dotted: str, value: Any, key: str, raw: Any) -> None:
        if dotted in given and given[dotted] != key:
            problems.append(f"{where}: {key}: sets the same thing as {given[dotted]}; keep one of them")
            return
        given[dotted] = key
        set_path(tree, dotted, value)
        origins[dotted] = Origin(where, key, raw)

    java_present = {
        k: v for k, v in flat.items() if k in JAVA_KEYS and v is not None and not (isinstance(v, str) and not v.strip())
    }
    # Java keys whose fallback partner is present are skipped (the preferred one wins, as in Java).
    shadowed = {
        lower
        for keys in JAVA_PRECEDENCE.values()
        for i, lower in enumerate(keys)
        if any(k in java_present for k in keys[:i])
    }
    for key, value in flat.items():
        if key in BOOKIE_SECURITY_KEYS:
            continue  # translated together below (they depend on each other)
        if value is None or (isinstance(value, str) and not value.strip()):
            # Blank means "not set", as Java reads `metadataServiceUri=`; still catch typos in the name.
            if not (key in JAVA_KEYS or key in CHECKED_JAVA_KEYS or is_our_path(key) or is_known_java_key(key)):
                problems.append(f"{where}: {key}: unknown setting{_suggest(key)}")
            elif key not in JAVA_KEYS and key not in CHECKED_JAVA_KEYS and not is_our_path(key):
                ignored.append(key)
            continue
        if key in JAVA_KEYS:
            if key in shadowed or key in SCRUTINY_KEYS:
                continue
            jk = JAVA_KEYS[key]
            try:
                converted = jk.convert(value) if jk.convert else value
            except ValueError as exc:
                problems.append(f"{where}: {key}: {exc}")
                continue
            put(jk.path, converted, key, value)
        elif key in CHECKED_JAVA_KEYS:
            try:
                CHECKED_JAVA_KEYS[key](value)
            except ValueError as exc:
                problems.append(f"{where}: {key}: {exc}")
        elif is_our_path(key):
            put(key, value, key, value)
        elif is_known_java_key(key):
            ignored.append(key)
        else:
            problems.append(f"{where}: {key}: unknown setting{_suggest(key)}")
    security, security_ignored, security_problems = translate_bookie_security(
        {k: v for k, v in flat.items() if k in BOOKIE_SECURITY_KEYS and v is not None}
    )
    problems += [f"{where}: {p}" for p in security_problems]
    ignored += security_ignored
    for t in security:
        put(t.path, t.value, t.key, t.raw)
    # Both Java scrutiny keys feed our one scrutiny interval: the more frequent non-zero one wins;
    # zero only when every given one is zero (Java's "disabled").
    scrutiny = [(k, java_present[k]) for k in SCRUTINY_KEYS if k in java_present]
    if scrutiny:
        parsed: list[tuple[str, Any, float | None]] = []
        for k, v in scrutiny:
            try:
                parsed.append((k, v, float(str(v).strip())))
            except ValueError:
                parsed.append((k, v, None))
        bad = [(k, v) for k, v, n in parsed if n is None or n < 0]
        if bad:
            k, v = bad[0]
            put("schedule.scrutiny_seconds", v, k, v)  # let the model word the error
        else:
            nonzero = [(n, k, v) for k, v, n in parsed if n]
            n, k, v = min(nonzero) if nonzero else (0.0, parsed[0][0], parsed[0][1])
            put("schedule.scrutiny_seconds", n, k, v)
    if "racks.source" in given and tree.get("racks", {}).get("source") == "script" and "racks.script" not in given:
        tree["racks"]["source"] = "none"  # Java's ScriptBasedMapping without a script: everyone default rack
    if problems:
        raise ConfigError(problems)
    return tree, sorted(ignored)


def _suggest(key: str) -> str:
    candidates = our_names() + list(JAVA_KEYS) + sorted(BOOKIE_SECURITY_KEYS)
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""
