"""Loading the settings: command-line flags (init kwargs) beat `BKAUDIT_*` environment variables (`__`
nests), which beat one config file (`files`), which beats the defaults. Also the admin address the CLI's
clients use (`admin_address_from_environment`), under the same prefix.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from auditor import redact
from auditor.errors import ConfigError
from auditor.settings.clientenv import CLI_VARIABLES

from .files import translate_file
from .model import ENV_PREFIX, FILE_DATA, Settings, model_for
from .origins import (
    Origin,
    command_line_origins,
    describe,
    environment_origins,
    origin_for,
    secret_names,
    unknown_variables,
)
from .rules import cross_checks
from .values import one_line

ENV_CONFIG_FILE = ENV_PREFIX + "CONFIG_FILE"
# Where the CLI's admin clients (status, findings, ...) find the daemon when --admin is not given. Not a
# daemon setting (the daemon binds admin.bind, BKAUDIT_ADMIN__BIND); BKAUDIT_ADMIN alone would be the
# whole `admin` section as JSON.
ENV_ADMIN_ADDRESS = ENV_PREFIX + "ADMIN_ADDRESS"
ENV_ADMIN_ADDRESS_DEPRECATED = "BK_AUDITOR_ADMIN"  # the old name, still read; warns


def load_settings(
    config_file: str | Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    option_names: Mapping[str, str] | None = None,
) -> Settings:
    """Build and validate the settings. `overrides` (our nested names, from CLI flags) beat environment
    variables, which beat the config file (`config_file`, else $BKAUDIT_CONFIG_FILE), which beats defaults.
    `option_names` maps dotted setting names to the CLI flag that set them (for messages).
    Raises ConfigError with one clear line per problem."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    path = (
        Path(config_file)
        if config_file
        else (Path(os.environ[ENV_CONFIG_FILE]) if os.environ.get(ENV_CONFIG_FILE) else None)
    )
    file_origins: dict[str, Origin] = {}
    env_origins: dict[str, Origin] = {}
    cli_origins: dict[str, Origin] = {}
    tree: dict[str, Any] = {}
    ignored: list[str] = []
    if path is not None:
        tree, ignored = translate_file(path, file_origins)
    unknown = unknown_variables((ENV_CONFIG_FILE, ENV_ADMIN_ADDRESS, *CLI_VARIABLES))
    if unknown:
        raise ConfigError(unknown)
    environment_origins(env_origins)
    command_line_origins(overrides, cli_origins, option_names or {})
    token = FILE_DATA.set(tree)
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        stacks = [cli_origins, env_origins, file_origins]
        problems = []
        for err in exc.errors():
            origin = origin_for(tuple(err.get("loc", ())), stacks)
            dotted = ".".join(str(p) for p in err.get("loc", ()))
            label = origin.label() if origin else dotted
            secret = dotted in secret_names()
            problems.append(f"{label}: {describe(err, origin.raw if origin else None, secret=secret)}")
        raise ConfigError(problems) from None
    except (SettingsError, RecursionError) as exc:
        # A whole section given as JSON in BKAUDIT_<SECTION> did not decode: name the variable.
        name, problem = _bad_section_json() or (None, one_line(str(exc.__cause__ or exc)))
        raise ConfigError(f"environment: {name or 'a ' + ENV_PREFIX + '* variable'}: {problem}") from None
    finally:
        FILE_DATA.reset(token)
    settings._config_file = path
    settings._ignored_java_keys = tuple(ignored)
    for dotted in secret_names():  # never in a log line, whoever writes it (auditor.redact)
        value: Any = settings
        for part in dotted.split("."):
            value = getattr(value, part)
        redact.hide(value)
    problems = cross_checks(settings, [cli_origins, env_origins, file_origins])
    if problems:
        raise ConfigError(problems)
    return settings


def _bad_section_json() -> tuple[str, str] | None:
    """(variable, problem) for the first BKAUDIT_<SECTION> variable whose value is not usable JSON."""
    sections = {ENV_PREFIX + name.upper() for name in Settings.model_fields if model_for([name]) is not None}
    for name, value in sorted(os.environ.items()):
        if name.upper() in sections:
            try:
                json.loads(value)
            except RecursionError:
                return name, "JSON nested too deeply to be a setting"
            except ValueError as exc:
                return name, f"not valid JSON ({exc})"
    return None


def admin_address_from_environment(environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """(the admin address the environment gives, or None; a warning to show, or None).

    `BKAUDIT_ADMIN_ADDRESS` is the name; the old `BK_AUDITOR_ADMIN` is still read, with a deprecation
    warning. When both are set and differ, the new one wins and the warning says so."""
    env = os.environ if environ is None else environ
    new = (env.get(ENV_ADMIN_ADDRESS) or "").strip() or None
    old = (env.get(ENV_ADMIN_ADDRESS_DEPRECATED) or "").strip() or None
    if old is None:
        return new, None
    if new is None:
        return old, f"{ENV_ADMIN_ADDRESS_DEPRECATED} is deprecated; set {ENV_ADMIN_ADDRESS} instead"
    if new != old:
        return new, (
            f"{ENV_ADMIN_ADDRESS_DEPRECATED}={old} is deprecated and ignored: "
            f"{ENV_ADMIN_ADDRESS}={new} is used (unset {ENV_ADMIN_ADDRESS_DEPRECATED})"
        )
    return new, f"{ENV_ADMIN_ADDRESS_DEPRECATED} is deprecated and can be unset ({ENV_ADMIN_ADDRESS} is set)"
