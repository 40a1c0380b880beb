"""The command line that replays one case, from any directory:

    pytest /abs/matrix.yaml::CASE_ID --scaledmm-matrix --scaledmm-profile NAME

The matrix is named once, by its absolute path, in the node id of the case: pytest finds the
matrix's project from it (rootdir, ini file, the conftest.py that declares hook kernels) wherever
it runs, and a bare --scaledmm-matrix runs the matrix file the command line names
(plugin/sources.py). A matrix whose name does not end in .yaml or .yml is also given to the
option.

It names every setting that decides which cases exist (the profile, always; the seed and device
when the run was given them), since the project's ini file or environment may say otherwise
where the command is replayed.

Every word of it comes from report data, which may be crafted: no word may be one that pytest or
a shell reads as anything but what it is. A relative path starts with ./ (a leading "-" would be
an option, a leading "@" a file of arguments to pytest's parser), every word is shell-quoted, and
a value that no word can carry as it is stands in for the command with the reason."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

# What a case id this plugin writes is made of (matrix/cases.py case_id): never a leading "-"
# (an option), never a shell or path character. An id from a report is checked against it before
# it reaches a command or a file name.
CASE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,199}")
# A profile or device named in a command: a word, never an option.
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+=-]{0,99}")
# Seeds a run takes (plugin/settings.py).
MAX_SEED = 2**63 - 1
# The names a bare --scaledmm-matrix finds a matrix by on the command line (plugin/sources.py).
MATRIX_SUFFIXES = (".yaml", ".yml")
# What pytest reads in a path argument: "::" starts a node id's names, "[" a parametrization.
_PATH_SYNTAX = (("::", "pytest reads as the start of a node id"), ("[", "pytest reads as a parametrization"))


# One value of --scaledmm-recorded-on (a torch version, a device, an arch, a tox env name).
_VALUE = re.compile(r"[A-Za-z0-9_.+:-]{1,64}")
# The report's environment keys the option names, by the names it gives them.
RECORDED_KEYS = (("torch", "torch"), ("device", "device"), ("arch", "arch"), ("tox", "tox_env"))


def recorded_on(environment) -> str | None:
    """`torch=2.13.0+cpu,device=cpu,tox=torch213`: the environment that recorded a case, as its
    replay command names it (--scaledmm-recorded-on); None when it names no torch version. A value
    outside the word grammar is left out: report data never becomes another word of a command."""
    if not isinstance(environment, Mapping):
        return None
    parts = {}
    for name, key in RECORDED_KEYS:
        value = environment.get(key)
        if isinstance(value, str) and _VALUE.fullmatch(value):
            parts[name] = value
    if parts.get("arch") == parts.get("device"):  # the CPU's arch is "cpu": said once
        parts.pop("arch", None)
    if "torch" not in parts:
        return None
    return ",".join(f"{name}={value}" for name, value in parts.items())


def parse_recorded_on(text: str) -> dict:
    """{name: value} of a --scaledmm-recorded-on value; ValueError naming what is wrong."""
    known = {name for name, _ in RECORDED_KEYS}
    parts = {}
    for item in str(text).split(","):
        name, equals, value = item.partition("=")
        if not equals or name not in known or not _VALUE.fullmatch(value):
            raise ValueError(f"{item!r} is not one of torch=VERSION, device=DEVICE, arch=ARCH, tox=ENV")
        parts[name] = value
    if "torch" not in parts:
        raise ValueError("it names no torch=VERSION")
    return parts


def valid_case_id(case_id) -> bool:
    return isinstance(case_id, str) and CASE_ID.fullmatch(case_id) is not None


def unsafe_command(what: str, why: str = "is not one this plugin writes") -> str:
    """What stands in for a replay command that report data would turn into another command."""
    return f"(no replay command: {what} {why})"


def path_problem(path: str) -> str | None:
    """Why `path` cannot be a word of a replay command as it is, or None."""
    for ch in path:
        if not ch.isprintable():  # a line break, NUL, an escape, a bidi override, an undecodable byte
            return f"holds {ascii(ch)[1:-1]}, which a command line cannot carry as it is"
    for syntax, how in _PATH_SYNTAX:
        if syntax in path:
            return f"holds {syntax!r}, which {how}"
    if "  " in path:
        # Markdown table cells and HTML text show a run of spaces as one: the path copied from
        # there would be another.
        return "holds a run of spaces, which a page shows as one space"
    return None


def path_word(path: str) -> str:
    """A path as a command's word: a relative one from ./ (never an option or an @file)."""
    if not Path(path).is_absolute():
        path = "./" + path
    return shlex.quote(path)


def replay_command(
    matrix_path: str | None,
    case_id: str,
    profile: str | None = None,
    seed: int | None = None,
    device: str | None = None,
    environment: Mapping | None = None,
    after: Sequence[str] = (),
    sequence: Sequence[int] | None = None,
) -> str:
    """`seed`, `device`: what the run was given (--scaledmm-seed, --scaledmm-device), None when it
    used the matrix's seed and picked the device itself; `profile` None: the default one;
    `environment`: the report's environment block, named by --scaledmm-recorded-on (a replay
    under another torch then warns); `after`: the cases an ORDER_DEPENDENT case fails after
    (--scaledmm-after); `sequence`: the calls after the first of a shrunk sequence
    (--scaledmm-sequence)."""
    if not valid_case_id(case_id) or not all(valid_case_id(earlier) for earlier in after):
        return unsafe_command("the case id")
    for what, word in (("the profile", profile), ("the device", device)):
        if word is not None and not _WORD.fullmatch(str(word)):
            return unsafe_command(what)
    if seed is not None and not (type(seed) is int and 0 <= seed <= MAX_SEED):
        return unsafe_command("the seed")
    # A report records the absolute path; a relative one (hand-made) is kept relative.
    path = str(Path(matrix_path or "matrix.yaml"))
    problem = path_problem(path)
    if problem:
        return unsafe_command("the matrix path", problem)
    words = [f"pytest {path_word(path + '::' + case_id)} --scaledmm-matrix"]
    if not path.endswith(MATRIX_SUFFIXES):  # a bare --scaledmm-matrix would not take it from the node id
        words.append(path_word(path))
    recorded = recorded_on(environment)
    if recorded:
        words.append(f"--scaledmm-recorded-on {recorded}")
    words.append(f"--scaledmm-profile {shlex.quote(profile or 'default')}")
    if seed is not None:
        words.append(f"--scaledmm-seed {seed}")
    if device and device != "auto":
        words.append(f"--scaledmm-device {shlex.quote(device)}")
    if after:
        words.append(f"--scaledmm-after {','.join(after)}")
    if sequence is not None:
        if not sequence or not all(type(index) is int and 0 <= index < 1000 for index in sequence):
            return unsafe_command("the sequence's calls")
        words.append(f"--scaledmm-sequence {','.join(str(index) for index in sequence)}")
    return " ".join(words)


def sequence_of(record: Mapping | None) -> list[int] | None:
    """The calls after the first a shrunk sequence keeps (its extra.sequence.shrunk.keep); report
    data, so anything but a list of small ints is none."""
    found = ((record or {}).get("extra") or {}).get("sequence") if isinstance(record, Mapping) else None
    shrunk = found.get("shrunk") if isinstance(found, Mapping) else None
    keep = shrunk.get("keep") if isinstance(shrunk, Mapping) else None
    if not isinstance(keep, list) or not all(type(index) is int and 0 <= index < 1000 for index in keep):
        return None
    return keep


def after_of(record: Mapping | None) -> list[str]:
    """The cases an ORDER_DEPENDENT record fails after (its extra.replayed_alone.after); report
    data, so anything but a list of strings is none."""
    found = ((record or {}).get("extra") or {}).get("replayed_alone") if isinstance(record, Mapping) else None
    after = found.get("after") if isinstance(found, Mapping) else None
    if (record or {}).get("outcome") != "ORDER_DEPENDENT" or not isinstance(after, list):
        return []
    return [str(case_id) for case_id in after]


def forced_options(seed: int | None, device: str | None) -> dict:
    """What a report records under matrix.forced for its replay commands (see replay_command)."""
    return {"seed": seed, "device": None if device in (None, "auto") else device}
