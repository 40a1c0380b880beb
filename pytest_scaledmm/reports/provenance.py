"""Where a report's evidence came from, as compare, gate, merge and the terminal say it: cases
that ran more than once (each counts by its worst run), and the code that ran (matrix.code: the
kernels' and the plugin's digests)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..records import CaseRecord


def repeated_cases(cases: Iterable[CaseRecord]) -> list[CaseRecord]:
    """The records of cases that ran more than once (a record with `runs`)."""
    return [record for record in cases if isinstance(record.get("runs"), list) and len(record["runs"]) > 1]


def repeated_note(cases: Iterable[CaseRecord]) -> str | None:
    """One line for the cases that ran more than once, with one of them and its runs; None when
    every case ran once."""
    repeated = repeated_cases(cases)
    if not repeated:
        return None
    # A case whose runs differ is the one worth showing.
    example = min(repeated, key=lambda r: (len({str(run.get("outcome")) for run in r["runs"]}) == 1, r["id"]))
    runs = ", then ".join(str(run.get("outcome")) for run in example["runs"])
    return f"{len(repeated)} case(s) ran more than once: each counts by its worst run (e.g. {example['id']}: {runs})"


def repeated_notes(reports: Iterable[tuple[str, Mapping]]) -> list[str]:
    """The repeated-cases line of each (label, report) that has one."""
    notes = []
    for label, report in reports:
        note = repeated_note(report.get("cases") or [])
        if note:
            notes.append(f"{label}: {note}")
    return notes


# -- the code that ran (matrix.code, matrix/code_digest.py) ----------------------------------------
CODE_UNKNOWN = "record the code that ran (a report of an earlier version)"


def code_of(report: Mapping) -> Mapping | None:
    """A report's code block, None when it has none."""
    code = (report.get("matrix") or {}).get("code")
    return code if isinstance(code, Mapping) else None


def _kernels(code: Mapping) -> Mapping[str, Mapping]:
    kernels = code.get("kernels")
    return {str(k): v for k, v in kernels.items() if isinstance(v, Mapping)} if isinstance(kernels, Mapping) else {}


def _short(digest: object) -> str:
    return digest[:12] if isinstance(digest, str) else "no digest"


def _by_digest(digests: Iterable[tuple[str, object]]) -> dict[str, list[str]]:
    """Short digest -> the shard paths that recorded it, grouped by the whole digest."""
    groups: dict[object, list[str]] = {}
    for path, digest in digests:
        groups.setdefault(digest, []).append(path)
    return {_short(digest): paths for digest, paths in groups.items()}


def _changed_files(entries: Sequence[Mapping]) -> list[str]:
    """The files whose digests differ between kernel entries (one there and not in another too)."""
    tables: list[Mapping] = [entry["files"] if isinstance(entry.get("files"), Mapping) else {} for entry in entries]
    keys = list(dict.fromkeys(key for table in tables for key in table))
    return [str(key) for key in keys if len({repr(table.get(key)) for table in tables}) > 1]


def _files_text(files: Sequence[str], limit: int = 3) -> str:
    more = f" and {len(files) - limit} more" if len(files) > limit else ""
    return ", ".join(files[:limit]) + more


def shards_code_difference(shards: Sequence[tuple[str, Mapping]]) -> str | None:
    """One line when the shards ((path, report) pairs) did not run the same code, naming the
    kernel (or the plugin) and the shard files; None when they did, or when none records it."""
    codes = [(path, code_of(report)) for path, report in shards]
    if all(code is None for _, code in codes):
        return None  # reports of an earlier version: nothing to compare
    missing = [path for path, code in codes if code is None]
    if missing:
        return (
            f"the shards cannot be shown to have run the same code: {', '.join(missing)}"
            f" {'does' if len(missing) == 1 else 'do'} not {CODE_UNKNOWN}: run every shard with this version"
        )
    recorded = [(path, code) for path, code in codes if code is not None]
    names = sorted({name for _, code in recorded for name in _kernels(code)})
    differing = []
    for name in names:
        entries = [_kernels(code).get(name) or {} for _, code in recorded]
        if all(entry.get("builtin") is True for entry in entries):
            continue  # the plugin's code: its digest is compared below
        by_digest = _by_digest((path, entry.get("sha256")) for (path, _), entry in zip(recorded, entries))
        if len(by_digest) > 1:
            differing.append((name, by_digest, _changed_files(entries)))
    if differing:
        name, by_digest, files = differing[0]
        shown = "; ".join(f"{digest} in {', '.join(paths)}" for digest, paths in by_digest.items())
        changed = f"; changed: {_files_text(files)}" if files else ""
        more = f" (and {len(differing) - 1} more kernel(s))" if len(differing) > 1 else ""
        return (
            f"the shards ran different code: kernel {name}'s code differs ({shown}{changed}){more}:"
            " run every shard with the same code"
        )
    plugins = _by_digest((path, code.get("plugin")) for path, code in recorded)
    if len(plugins) > 1:
        shown = "; ".join(f"{digest} in {', '.join(paths)}" for digest, paths in plugins.items())
        return (
            f"the shards ran different code: the plugin's sources differ ({shown}): run every shard with the same code"
        )
    return None


def code_changes(before: tuple[str, Mapping], after: tuple[str, Mapping]) -> list[str]:
    """One line per kernel whose code changed between two reports ((label, report) pairs), and
    one when the plugin's sources did (with the built-in kernels, whose code they are); a line
    when only one report records its code."""
    (old_label, old_report), (new_label, new_report) = before, after
    old, new = code_of(old_report), code_of(new_report)
    if old is None and new is None:
        return []
    if old is None or new is None:
        label = old_label if old is None else new_label
        return [f"{label} does not {CODE_UNKNOWN}: whether a kernel's code changed cannot be told"]
    between = f"between {old_label} and {new_label}"
    lines = []
    old_kernels, new_kernels = _kernels(old), _kernels(new)
    builtins = []
    for name in sorted(set(old_kernels) & set(new_kernels)):
        was, now = old_kernels[name], new_kernels[name]
        if was.get("builtin") is True and now.get("builtin") is True:
            builtins.append(name)
            continue
        if was.get("sha256") is None or now.get("sha256") is None:
            why = now.get("unknown") or was.get("unknown") or "no digest"
            lines.append(f"kernel {name}: whether its code changed {between} cannot be told ({why})")
        elif was.get("sha256") != now.get("sha256"):
            files = _changed_files([was, now])
            lines.append(f"kernel {name}: its code changed {between}" + (f" ({_files_text(files)})" if files else ""))
    if old.get("plugin") != new.get("plugin"):
        versions = [str((r.get("environment") or {}).get("plugin") or "?") for r in (old_report, new_report)]
        with_them = f", and with them the built-in kernels {', '.join(builtins)}" if builtins else ""
        lines.append(
            f"the plugin's sources changed {between} (pytest-scaledmm {versions[0]} and {versions[1]}){with_them}"
        )
    return lines
