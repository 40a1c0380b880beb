"""Where each option's value comes from: the command line, then a SCALEDMM_* environment
variable, then the ini file (pyproject.toml [tool.pytest.ini_options], pytest.ini, tox.ini,
setup.cfg), then the default. The resolved values are written back to config.option, so that
config.getoption gives them everywhere; each keeps a label naming its source for error messages
("SCALEDMM_TIMEOUT=nan: ...").

The matrix runs only when --scaledmm-matrix is given (on the command line or in addopts). A bare
--scaledmm-matrix runs the matrix file the command line names (`pytest m.yaml::CASE
--scaledmm-matrix`, as replay commands write it), else the one an ini or environment
`scaledmm_matrix` names, else matrix.yaml; those never turn a plain `pytest` run of a project's
tests into a matrix run. Options set without it get one line saying that they had no effect."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..matrix.replay_command import MATRIX_SUFFIXES
from . import options as opt

SOURCES_KEY = pytest.StashKey["Sources"]()


@dataclass(frozen=True)
class Given:
    value: Any
    origin: str  # command line, environment, ini, default
    label: str  # how a message names it: --scaledmm-timeout, SCALEDMM_TIMEOUT=nan, pyproject.toml ...


@dataclass(frozen=True)
class Sources:
    matrix_on: bool
    given: dict  # dest -> Given
    unused: tuple  # labels of options set although the matrix does not run

    def label(self, option: opt.Option) -> str:
        given = self.given.get(option.dest)
        return given.label if given is not None else option.flag

    def problem(self, option: opt.Option, text: str) -> str:
        """A usage error's line for a bad value of `option`, naming where it came from."""
        given = self.given.get(option.dest)
        if given is None or given.origin in ("command line", "default"):
            return f"{option.flag}: {text}"
        return f"{given.label}: {text}"


def resolve_options(config: pytest.Config) -> Sources:
    """Resolve every plugin option once (the result is kept in the config's stash); a bad value
    from the environment or an ini file is a pytest.UsageError naming it, when the matrix runs."""
    known = config.stash.get(SOURCES_KEY, None)
    if known is not None:
        return known
    raw_matrix = getattr(config.option, opt.MATRIX.dest, None)
    matrix_on = raw_matrix is not None
    given: dict = {}
    unused: list = []
    for option in opt.PLUGIN_OPTIONS:
        cli = getattr(config.option, option.dest, None)
        named = None
        if option is opt.MATRIX and cli is True:
            cli = None  # given without a path: the path comes from below
            named = matrix_on_command_line(config)
        if named is not None:
            found = Given(str(named), "command line", option.flag)
        elif cli is not None:
            found = Given(cli, "command line", option.flag)
        else:
            set_by_user = _from_environment(config, option, strict=matrix_on) or _from_ini(
                config, option, strict=matrix_on
            )
            if set_by_user is not None and not matrix_on:
                unused.append(set_by_user.label)
                set_by_user = None
            default = "matrix.yaml" if option is opt.MATRIX else option.default
            found = set_by_user if set_by_user is not None else Given(default, "default", option.flag)
        if option is opt.MATRIX and not matrix_on:
            found = Given(None, "default", option.flag)
        given[option.dest] = found
        setattr(config.option, option.dest, found.value)
    if not matrix_on:
        unused += [given[o.dest].label for o in opt.PLUGIN_OPTIONS if given[o.dest].origin == "command line"]
    sources = Sources(matrix_on, given, tuple(unused))
    config.stash[SOURCES_KEY] = sources
    return sources


def matrix_on_command_line(config: pytest.Config) -> Path | None:
    """The matrix file the command line names as a path argument, or as the file of a node id
    (`m.yaml::CASE`): one ending in .yaml or .yml that is there; None when there is none. Two are
    a usage error: which one a bare --scaledmm-matrix should run is not said."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return None
    found: dict[Path, str] = {}
    for arg in config.args:
        part = str(arg).split("::", 1)[0]
        path = Path(config.invocation_params.dir, part)
        if path.suffix in MATRIX_SUFFIXES and path.is_file():
            found.setdefault(path.resolve(), part)
    if len(found) > 1:
        raise pytest.UsageError(
            f"{opt.MATRIX.flag} without a path: the command line names {len(found)} matrix files"
            f" ({', '.join(found.values())}); give the one to run as {opt.MATRIX.flag} PATH"
        )
    return next(iter(found), None)


def _from_environment(config: pytest.Config, option: opt.Option, strict: bool) -> Given | None:
    raw = os.environ.get(option.env_name)
    if raw is None or raw.strip() == "":
        return None
    label = f"{option.env_name}={raw}"
    value = _parsed(option, raw, label, strict)
    if value is None:
        return Given(None, "environment", label)
    if option.path:
        value = str(Path(config.invocation_params.dir, value))
    return Given(value, "environment", label)


def _from_ini(config: pytest.Config, option: opt.Option, strict: bool) -> Given | None:
    try:
        raw = config.getini(option.ini_name)
    except (ValueError, pytest.UsageError) as exc:  # the ini value has the wrong type
        if strict:
            raise pytest.UsageError(str(exc)) from None
        return Given(None, "ini", _ini_label(config, option, None))
    if raw is None or raw == "" or raw == []:
        return None
    label = _ini_label(config, option, raw)
    value = _parsed(option, raw, label, strict)
    if value is not None and option.path:
        base = Path(config.inipath).parent if config.inipath else Path(config.invocation_params.dir)
        value = str(base / value)
    return Given(value, "ini", label)


def _parsed(option: opt.Option, raw: object, label: str, strict: bool) -> Any:
    try:
        return opt.parse_value(option, raw)
    except ValueError as exc:
        if strict:
            raise pytest.UsageError(f"{label}: {exc}") from None
        return None


# The table each kind of ini file keeps pytest's settings in.
_SECTIONS = {"pyproject.toml": "[tool.pytest.ini_options]", "setup.cfg": "[tool:pytest]"}


def _ini_label(config: pytest.Config, option: opt.Option, raw: object) -> str:
    shown = "" if raw is None else f" = {' '.join(map(str, raw)) if isinstance(raw, list) else raw}"
    name = option.ini_name
    if _overridden(config, name):
        return f"-o {name}{shown.replace(' = ', '=', 1)}"
    inipath = config.inipath
    if inipath is None:
        return f"ini option {name}{shown}"
    section = _SECTIONS.get(inipath.name, "[pytest]")
    entry = getattr(config, "_inicfg", {}).get(name)
    if inipath.name == "pyproject.toml" and getattr(entry, "mode", None) == "toml":
        section = "[tool.pytest]"
    return f"{inipath.name} {section} {name}{shown}"


def _overridden(config: pytest.Config, name: str) -> bool:
    """Whether `-o name=...` set the ini value (pytest's private records; False when unknown)."""
    entry = getattr(config, "_inicfg", {}).get(name)
    if getattr(entry, "origin", None) == "override":
        return True
    overrides = getattr(config, "_override_ini", None) or ()
    return any(str(item).split("=", 1)[0].strip() == name for item in overrides)


class NotRunHint:
    """Options given while the matrix does not run: one line at the end, since the run collects
    the project's tests (or nothing) and would otherwise not say why no case ran."""

    def __init__(self, unused: tuple[str, ...]) -> None:
        self.unused = unused

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_line(not_run_hint(self.unused), yellow=True)


def not_run_hint(unused: tuple[str, ...]) -> str:
    shown = ", ".join(unused[:4]) + (f" and {len(unused) - 4} more" if len(unused) > 4 else "")
    return (
        f"scaledmm: the matrix did not run: {shown} take(s) effect only with --scaledmm-matrix"
        " (give it, or add it to addopts to run the matrix by default)"
    )


def not_run_hint_plugin(config: pytest.Config) -> NotRunHint | None:
    """The hint's plugin object when options were given without the matrix, else None."""
    sources = config.stash.get(SOURCES_KEY, None)
    if sources is None or sources.matrix_on or not sources.unused:
        return None
    if hasattr(config, "workerinput"):  # the controller says it once
        return None
    return NotRunHint(sources.unused)
