"""The `scaledmm` console script (also `python -m pytest_scaledmm`).

Subcommands live in SUBCOMMANDS. Adding one is adding one function::

    @subcommand("doctor", "check what this machine can run", [Arg("--json", action="store_true")])
    def doctor(args) -> int:
        from .doctor import run_doctor  # noqa: PLC0415 (fast --help): heavy modules inside
        return run_doctor(args)

Arguments are `Arg(...)` (argparse's own signature) or an `Option` from plugin/options.py when the
pytest plugin has the same option (its flag loses the "scaledmm-" prefix here).

Exit codes: 0 success, 1 the gate failed, 2 usage error or an unusable report or matrix (one line
on stderr naming the file, no traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__
from .errors import ScaledmmError
from .matrix.errors import MatrixError
from .plugin.options import (
    ALLOW_CAPABILITY_LOSS,
    ALLOW_LOOSER_SLACK,
    ALLOW_MISSING,
    ALLOW_UNCHECKED,
    ALLOW_WORSE,
    BASELINE,
    DEVICE_CHOICES_HELP,
    MATRIX,
    Option,
    validate_device,
)
from .reports.files import not_a_file, stream_target, write_stream, write_text_atomic
from .reports.printable import printable
from .reports.report_path import is_report_file
from .reports.step_summary import append_markdown, same_file, step_summary_path

if TYPE_CHECKING:
    from .reports.compare import Comparison

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class Arg:
    flags: tuple
    kwargs: dict

    def __init__(self, *flags: str, **kwargs):
        object.__setattr__(self, "flags", flags)
        object.__setattr__(self, "kwargs", kwargs)


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    run: Callable[[argparse.Namespace], int]
    # Or a function giving them, called when the parser is built (compare's come from RENDERERS).
    arguments: tuple | Callable[[], Sequence[Arg | Option]] = field(default=())


SUBCOMMANDS: dict[str, Subcommand] = {}


def subcommand(name: str, help: str, arguments: Sequence[Arg | Option] | Callable[[], Sequence[Arg | Option]] = ()):
    """Register the decorated `fn(args) -> exit code` as `scaledmm NAME`."""

    def register(fn: Callable[[argparse.Namespace], int]):
        if name in SUBCOMMANDS:
            raise ValueError(f"subcommand {name!r} is registered twice")
        SUBCOMMANDS[name] = Subcommand(name, help, fn, arguments if callable(arguments) else tuple(arguments))
        return fn

    return register


def shared(option: Option, help: str | None = None, **kwargs) -> Option:
    """A plugin option as this subcommand needs it: same flag and dest, other help or defaults."""
    return replace(option, help=help or option.help, kwargs={**option.kwargs, **kwargs})


def _add_argument(parser: argparse.ArgumentParser, argument: Arg | Option) -> None:
    if isinstance(argument, Option):
        parser.add_argument(argument.cli_flag(), dest=argument.dest, help=argument.help, **argument.kwargs)
    else:
        parser.add_argument(*argument.flags, **argument.kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scaledmm",
        description="Compare and gate pytest-scaledmm reports across PyTorch versions and machines;"
        " set a project up for it (init).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in SUBCOMMANDS.values():
        sub = commands.add_parser(command.name, help=command.help, description=command.help)
        arguments = command.arguments() if callable(command.arguments) else command.arguments
        for argument in arguments:
            _add_argument(sub, argument)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for stream in (sys.stdout, sys.stderr):
        try:  # a file name that is not UTF-8 is shown escaped, never a traceback
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]  # a stand-in may lack it
        except (AttributeError, ValueError, OSError):
            pass
    try:
        return int(args.run(args))
    except OutputRefused as exc:
        print(printable(f"scaledmm {args.command}: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    # MatrixError is named as well: matrix/errors.py need not derive it from ScaledmmError.
    except (ScaledmmError, MatrixError) as exc:
        # The message names the file (and key); a traceback would only bury it. Each line
        # printable: a file name that is not UTF-8 or holds an escape sequence is shown escaped.
        lines = f"scaledmm {args.command}: error: {exc}".splitlines() or [""]
        print("\n".join(printable(line) for line in lines), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `scaledmm compare ... | head`: the reader left; say nothing more.

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


class OutputRefused(ScaledmmError):
    """An output path that would replace or append to a file the command did not make for it."""


@dataclass(frozen=True)
class ReportFormat:
    """A file `scaledmm compare` can write: one row of RENDERERS is one more format."""

    name: str  # as the command's "NAME: PATH" line names what it wrote
    flag: str
    help: str
    mark: str  # a line of each file of it: an existing file without it is not one of ours
    render: Callable[[Comparison, str | None, argparse.Namespace], str]  # (comparison, matrix, args)
    stdout: bool = False  # '-' prints it after the text verdict
    step_summary: bool = False  # appended, never replaced, when it names $GITHUB_STEP_SUMMARY
    # Whether the renderer escapes report text for a terminal itself (the built-in ones do);
    # otherwise '-' prints its lines through printable().
    escapes: bool = False
    mark_first: bool = False  # the mark begins the file (its first line that is not blank)


def _markdown(comparison: Comparison, matrix: str | None, args: argparse.Namespace) -> str:
    from .reports.render import render_markdown  # noqa: PLC0415 (jinja2 at first use)

    return render_markdown(comparison, matrix, args.max_rows)


def _html(comparison: Comparison, matrix: str | None, args: argparse.Namespace) -> str:
    from .reports.render import render_html  # noqa: PLC0415 (jinja2 at first use)

    return render_html(comparison, matrix, [g.strip() for g in args.group_by.split(",") if g.strip()])


RENDERERS: tuple[ReportFormat, ...] = (
    ReportFormat(
        "markdown",
        "--markdown",
        "write Markdown fit for a CI step summary ('-' for stdout)",
        "## scaled-mm compatibility matrix",
        _markdown,
        stdout=True,
        step_summary=True,
        escapes=True,
        mark_first=True,
    ),
    ReportFormat(
        "html",
        "--html",
        "write one self-contained HTML file with the heatmap",
        '<meta name="generator" content="pytest-scaledmm compare">',
        _html,
        escapes=True,
    ),
)


def _format_of(flag: str) -> ReportFormat:
    return next(row for row in RENDERERS if row.flag == flag)


# How the gate's Markdown verdict begins (reports/gate.py, GateResult.lines, in bold): a file
# whose first line is one of them was written by `scaledmm gate --markdown`.
GATE_MARKS = ("**gate passed: ", "**gate FAILED: ")


def carries_mark(head: str, marks: Sequence[str], first: bool) -> bool:
    """Whether the start of a file shows one of `marks` where this package writes it: its first
    line that is not blank begins with one (first), or one of its lines is one. A file that
    only mentions a mark (notes on the CI, a page quoting the output) carries none."""
    lines = [line.strip() for line in head.splitlines() if line.strip()]
    if first:
        return bool(lines) and lines[0].startswith(tuple(marks))
    return any(mark in lines for mark in marks)


def check_output(
    flag: str, path, inputs=(), append: bool = False, marks: Sequence[str] = (), writer: str = "scaledmm compare"
) -> None:
    """OutputRefused (one line naming the flag and the path) unless `path` may take this output:
    never a directory, a report read, any pytest-scaledmm report or shard, nor, unless it is the
    step summary (`append`), a file that does not begin as this command writes it (`marks`,
    at the start of the file; by default the mark of the flag's format)."""

    path = Path(path)
    if not os.path.lexists(path):
        return
    # Its links followed: /dev/stdout is whatever this command's output is.
    kind = not_a_file(path)
    if kind == "a directory" and not append:  # an append target that cannot take it is a warning (step_summary.py)
        raise OutputRefused(f"{flag} {path}: it is a directory; name a file")
    if kind and not append:  # reading a FIFO for its mark would wait for a writer
        raise OutputRefused(f"{flag} {path}: it is {kind}; name a regular file")
    if not kind and (any(same_file(path, i) for i in inputs) or is_report_file(path)):
        raise OutputRefused(
            f"{flag} {path}: it is a pytest-scaledmm report; it is never overwritten (a file name forgotten?)"
        )
    if append or stream_target(path):  # a device or this command's output: written in place, holds no mark
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO put there since: no wait
        with os.fdopen(fd, "rb") as handle:
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
            head = handle.read(4096).decode("utf-8", "replace") if regular else ""
    except OSError as exc:
        raise OutputRefused(f"{flag} {path}: cannot be read: {exc.strerror or exc}") from None
    if not regular:
        raise OutputRefused(f"{flag} {path}: it is not a regular file; name a regular file")
    if marks:  # appended to: wherever in it this package wrote last, it began the file
        found, how = carries_mark(head, marks, first=True), "appended to"
    else:
        row = _format_of(flag)
        found, how = carries_mark(head, (row.mark,), row.mark_first), "overwritten"
    if not found:
        raise OutputRefused(f"{flag} {path}: it is there and was not written by {writer}: it is never {how}")


def _write(path: str, text: str, flag: str = "--html") -> None:
    """A Markdown or HTML file, whole or not at all, 0644 (reports/files.py)."""

    try:
        if stream_target(path):  # never replaced: /dev/stdout renamed over is a file in /dev
            write_stream(path, text)
        else:
            write_text_atomic(path, text)
    except OSError as exc:
        raise OutputRefused(f"{flag} {path}: cannot write: {exc.strerror or exc}") from None


def _append_summary(command: str, markdown: str, also: str | None = None) -> None:
    """Append `markdown` to `also` (a --markdown PATH that appends) and to $GITHUB_STEP_SUMMARY
    (once when both name one file). A file that cannot be written is one warning line on stderr;
    the exit status stays the command's."""

    targets: list[str | Path] = [also] if also else []
    summary = step_summary_path()
    if summary is not None and not any(same_file(summary, t) for t in targets):
        targets.append(summary)
    for target in targets:
        try:
            append_markdown(target, markdown)
        except (OSError, ValueError) as exc:
            name = "$GITHUB_STEP_SUMMARY" if target is summary else "--markdown"
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            print(f"scaledmm {command}: warning: {name}: cannot append to {target}: {reason}", file=sys.stderr)


GROUP_BY = Arg(
    "--group-by",
    default="kernel,dtype_a,dtype_b,scale_a,scale_b",
    help="case parameters that make a heatmap row, comma-separated (default: %(default)s)",
)
COMPARE_MATRIX = shared(MATRIX, "matrix file named in replay commands (default: the one the reports recorded)")


def _compare_arguments() -> list[Arg | Option]:
    return [
        Arg(
            "reports",
            nargs="+",
            metavar="REPORT",
            help="report files, or directories of *.json reports (ordered by torch version)",
        ),
        *[Arg(row.flag, dest=row.name, metavar="PATH", help=row.help) for row in RENDERERS],
        GROUP_BY,
        COMPARE_MATRIX,
        Arg("--max-rows", type=int, default=30, help="cases listed per kind of change (default: %(default)s)"),
    ]


@subcommand(
    "compare",
    "align cases across reports (columns: environments) and classify how each case changed",
    _compare_arguments,
)
def compare_command(args) -> int:
    from .reports.compare import compare_reports, load_reports  # noqa: PLC0415 (fast --help)
    from .reports.render import render_markdown, render_text  # noqa: PLC0415 (fast --help)

    loaded = load_reports(args.reports)
    inputs = [path for path, _ in loaded]
    summary = step_summary_path()
    # (format, path) of each file asked for; '-' of a format that prints is not a file.
    files = [
        (row, getattr(args, row.name))
        for row in RENDERERS
        if getattr(args, row.name) and not (row.stdout and getattr(args, row.name) == "-")
    ]
    for i, (row, path) in enumerate(files):
        appends = row.step_summary and summary is not None and same_file(summary, path)
        check_output(row.flag, path, inputs, append=appends)
        for other, other_path in files[:i]:
            if same_file(path, other_path):
                raise OutputRefused(
                    f"{row.flag} {path}: {other.flag} names the same file; one would overwrite the other"
                )
    comparison = compare_reports(loaded)
    written = []
    # Replay commands run from anywhere: a matrix given here relative to this directory goes absolute.
    matrix = os.path.abspath(args.scaledmm_matrix) if args.scaledmm_matrix else None
    if matrix and os.path.isdir(matrix):  # a directory stands for its matrix.yaml, as in the plugin
        matrix = os.path.join(matrix, "matrix.yaml")
    # Rendered whether or not --markdown is given: it is what $GITHUB_STEP_SUMMARY gets.
    markdown = render_markdown(comparison, matrix, args.max_rows)
    printed = []
    # Files first: a closed stdout (`| head`) must not cost one.
    for row in RENDERERS:
        path = getattr(args, row.name)
        wanted = bool(path) or row.step_summary
        text = (markdown if row.render is _markdown else row.render(comparison, matrix, args)) if wanted else ""
        if path and not carries_mark(text[:4096], (row.mark,), row.mark_first):
            # Written without it, the file could never be replaced by this command (check_output).
            raise OutputRefused(f"{row.flag}: its renderer's output does not begin with its mark {row.mark!r}")
        if path == "-" and row.stdout:
            printed.append(text if row.escapes else "\n".join(printable(line) for line in text.splitlines()))
        elif path and row.step_summary and summary is not None and same_file(summary, path):
            written.append(f"{row.name}: appended to {path}")  # a step summary is never truncated
        elif path:
            _write(path, text, row.flag)
            written.append(f"{row.name}: {path}")
        if row.step_summary:
            _append_summary("compare", text)
    print(render_text(comparison, max_rows=args.max_rows, matrix_path=matrix))
    for text in printed:
        print(text)
    for line in written:
        print(line)
    return EXIT_OK


@subcommand(
    "gate",
    "exit 1 when the candidate report has a failure the baseline did not have (known failures excepted),"
    " or cannot show that it has none: an incomplete run, missing or duplicate cases, capability lost",
    [
        shared(BASELINE, "the earlier report to gate against", required=True, default=None),
        Arg("--candidate", required=True, metavar="REPORT", help="the new report"),
        shared(
            MATRIX,
            "matrix.yaml whose known_failures apply (default: the matrix the candidate recorded, when that"
            " file is here and unchanged)",
        ),
        shared(
            ALLOW_MISSING,
            "compare a partial run: an incomplete report and missing baseline cases are notes, not failures",
        ),
        shared(ALLOW_CAPABILITY_LOSS, "accept cases that ran in the baseline and are UNSUPPORTED or SKIPPED now"),
        shared(ALLOW_WORSE, "accept cases that fail the same way as in the baseline but by much more"),
        shared(ALLOW_LOOSER_SLACK, "accept a kernel whose own tolerance slack is larger than in the baseline"),
        shared(
            ALLOW_UNCHECKED,
            "accept that the candidate checked less of what PATTERN names (repeatable; fnmatch): KERNEL,"
            " KERNEL:SIDE or KERNEL:SIDE:AXIS=VALUE, as the 'not proven' lines name them",
        ),
        Arg(
            "--markdown",
            metavar="PATH",
            help="also append the verdict as Markdown to PATH: $GITHUB_STEP_SUMMARY, a new file, one"
            " that scaledmm gate or compare's --markdown wrote, or a device ('-' for stdout)",
        ),
    ],
)
def gate_command(args) -> int:
    from .reports.gate import run_gate  # noqa: PLC0415 (fast --help)
    from .reports.report import load_report  # noqa: PLC0415 (fast --help)

    baseline = (args.scaledmm_baseline, load_report(args.scaledmm_baseline))
    candidate = (args.candidate, load_report(args.candidate))
    printed = args.markdown == "-"  # stdout, as compare's --markdown -
    if args.markdown and not printed:
        # Appended to only where that cannot break a file of the user's (a matrix.yaml named
        # by a slip): the step summary, a new file, or Markdown this package began.
        summary = step_summary_path()
        check_output(
            "--markdown",
            args.markdown,
            [args.scaledmm_baseline, args.candidate],
            append=summary is not None and same_file(summary, args.markdown),
            marks=(*GATE_MARKS, _format_of("--markdown").mark),
            writer="scaledmm gate or compare",
        )
    result = run_gate(
        baseline,
        candidate,
        matrix_path=args.scaledmm_matrix,
        allow_missing=args.scaledmm_allow_missing,
        allow_capability_loss=args.scaledmm_allow_capability_loss,
        allow_worse=args.scaledmm_allow_worse,
        allow_looser_slack=args.scaledmm_allow_looser_slack,
        allow_unchecked=tuple(args.scaledmm_allow_unchecked or ()),
    )
    from .reports.render import md_escape  # noqa: PLC0415 (jinja2 at first use)

    lines = result.lines()
    markdown = "\n".join([f"**{md_escape(lines[0])}**", ""] + [f"- {md_escape(line.strip())}" for line in lines[1:]])
    # A device or this command's own output (/dev/stdout) is written in place, after the verdict.
    stream = args.markdown if args.markdown and not printed and stream_target(args.markdown) else None
    _append_summary("gate", markdown, None if printed or stream else args.markdown)
    # The verdict, pass or fail, on one stream (stdout): stderr is for usage errors and warnings.
    print("\n".join(lines))
    if printed:
        print(markdown)
    elif stream:
        try:
            write_stream(stream, markdown)
        except OSError as exc:
            print(f"scaledmm gate: warning: --markdown: cannot write {stream}: {exc.strerror or exc}", file=sys.stderr)
    return EXIT_OK if result.passed else EXIT_GATE_FAILED


@subcommand(
    "doctor",
    "what this machine is and can run: versions, device, scaled-mm ops (each probed), caches, compile variables",
    [
        Arg("--json", action="store_true", help="print JSON instead of text"),
        Arg("--device", default="auto", help=f"device to probe: {DEVICE_CHOICES_HELP}"),
        Arg("--no-probe", action="store_true", help="skip the op probes (they run in a child process)"),
    ],
)
def doctor_command(args) -> int:
    from .doctor import run  # noqa: PLC0415 (fast --help)
    from .execution.quiet import import_torch  # noqa: PLC0415 (torch: doctor only)

    import_torch()  # first: without torch's import-time noise (execution/quiet.py)

    problem = validate_device(args.device)
    if problem is None and args.device.startswith("cuda"):
        from .execution.device import resolve_device  # noqa: PLC0415 (torch: doctor only)

        try:
            resolve_device(args.device)
        except RuntimeError as exc:
            problem = str(exc)
    if problem:
        print(f"scaledmm doctor: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    return run(args)


@subcommand(
    "repro",
    "write standalone repro scripts for a report's failures: one per signature, or for the cases named",
    [
        Arg("report", metavar="REPORT", help="a report written by pytest --scaledmm-matrix"),
        Arg("--out", required=True, metavar="DIR", help="directory for the scripts (and their index.json)"),
        Arg("--case", action="append", default=[], metavar="ID", help="write a script for this case id (repeatable)"),
        shared(MATRIX, "matrix whose kernels the scripts use (default: the one the report recorded)"),
        Arg("--timeout", type=float, default=300.0, help="seconds after which a script treats the case as hung"),
    ],
)
def repro_command(args) -> int:
    from .reports.repro import scripts_from_report  # noqa: PLC0415 (fast --help)

    # A ReproError is a ScaledmmError: main prints it as one line, exit status 2.
    written = scripts_from_report(args.report, args.out, args.case, args.scaledmm_matrix, args.timeout)
    for path in written:
        print(path)
    if not written:
        print("no failures in the report: nothing to reproduce")
    if written and not args.scaledmm_matrix:
        print(
            "scaledmm repro: note: no --matrix: the report's matrix and its kernels were not imported;"
            " built-in kernels are embedded, others are imported by the script itself",
            file=sys.stderr,
        )
    return EXIT_OK


def _read_json(path):
    try:
        with open(path, "rb") as handle:
            return json.load(handle)
    except (OSError, ValueError, RecursionError):
        return None


def _is_merged_report(data) -> bool:
    """A report `scaledmm merge` wrote: its shard block names no index."""
    shard = data.get("shard") if isinstance(data, dict) else None
    return isinstance(shard, dict) and "index" in shard and shard["index"] is None


def _same_run(earlier, merged) -> bool:
    """Whether `earlier` (the report at OUT) is a merge of the same run as `merged`: the same
    first start among its shards (to the microsecond), matrix and environment. Replacing it
    loses nothing that this merge does not hold again."""
    if not _is_merged_report(earlier):
        return False

    def key(report):
        # OUT is read as plain JSON (it may be no report at all): any block may be anything.
        session, matrix, env, shard = (
            report.get(block) if isinstance(report.get(block), dict) else {}
            for block in ("session", "matrix", "environment", "shard")
        )
        return (
            session.get("started"),
            matrix.get("hash"),
            matrix.get("profile"),
            matrix.get("seed"),
            env.get("torch"),
            env.get("device_name"),
            shard.get("total_ids_sha256"),
        )

    return key(earlier) == key(merged)


def _lacks(earlier, merged) -> bool:
    """Whether `merged` lacks a shard or a case that `earlier` (a merge at OUT) held: one shard
    of a run merged onto the complete merge of that run, which has the same run's key."""

    def listed(items, key):
        # As JSON text: an item of a crafted file may hold a list, which a set cannot.
        if not isinstance(items, list):
            return set()
        return {json.dumps(item.get(key), sort_keys=True) for item in items if isinstance(item, dict)}

    def shards(report):
        shard = report.get("shard")
        return listed(shard.get("merged") if isinstance(shard, dict) else None, "index")

    def ids(report):
        return listed(report.get("cases"), "id")

    return not (shards(earlier) <= shards(merged) and ids(earlier) <= ids(merged))


@subcommand(
    "merge",
    "join the reports of the shards of one run (pytest --scaledmm-shard I/N) into one; exit 1, with the"
    " report written incomplete, unless every shard 1..N is there once, from one matrix and environment",
    [
        Arg(
            "out",
            metavar="OUT",
            help="the merged report to write (an earlier merged report there of another run, or with shards"
            " this merge lacks, moves to OUT.previous.json, as --scaledmm-report's does)",
        ),
        Arg("shards", nargs="+", metavar="SHARD", help="shard reports, or directories of *.json shard reports"),
    ],
)
def merge_command(args) -> int:

    from .reports.merge import ShardInput, merge_shards  # noqa: PLC0415 (fast --help)
    from .reports.report import (  # noqa: PLC0415 (fast --help)
        ReportError,
        is_unfinished_stub,
        load_report,
        previous_path,
        start_report,
        write_atomic,
    )
    from .reports.report_lock import ReportLock, ReportLocked  # noqa: PLC0415 (fast --help)

    out = Path(args.out)
    if out.is_dir() or (out.exists() and not is_report_file(out)):
        print(
            f"scaledmm merge: error: {out} is there and is not a pytest-scaledmm report: it is never overwritten",
            file=sys.stderr,
        )
        return EXIT_USAGE
    earlier = _read_json(out) if out.exists() else None
    if out.exists() and not (_is_merged_report(earlier) or is_unfinished_stub(out)):
        # A shard or a whole run's report (the baseline, say) at OUT would be lost to the merge.
        print(
            f"scaledmm merge: error: {out} is a report of a run, not an earlier merge: it is never overwritten;"
            " name another file for the merged report",
            file=sys.stderr,
        )
        return EXIT_USAGE
    paths = []
    for raw in args.shards:
        path = Path(raw)
        paths += sorted(path.glob("*.json")) if path.is_dir() else [path]
    inputs = []
    for path in paths:
        if same_file(path, out) or same_file(path, previous_path(out)):
            continue  # OUT inside a directory of shards: an earlier merge, not a shard
        try:
            inputs.append(ShardInput(str(path), load_report(path)))
        except ReportError as exc:
            inputs.append(ShardInput(str(path), error=str(exc)))
    result = merge_shards(inputs)
    # Under OUT's lock, as a run claims its report: an earlier merge of another run moves to
    # OUT.previous.json (start_report), so that a merge of one shard onto a complete merged
    # report (the published baseline) never leaves no copy of it.
    lock = ReportLock(out)
    try:
        lock.acquire()
    except ReportLocked as exc:
        print(f"scaledmm merge: error: {out} {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"scaledmm merge: error: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        moved = None
        same = earlier is not None and _same_run(earlier, result.report)
        whose = "more shards of this run" if same else "another run"
        # Replaced only by a merge of the same run that holds all it held: else kept aside.
        if earlier is not None and (not same or _lacks(earlier, result.report)):
            moved = start_report(out, "scaledmm merge in progress or killed before it wrote the merged report")
        write_atomic(out, result.report)
    except OSError as exc:  # a ClaimRefused names the path that failed
        reason = str(exc) if isinstance(exc, ScaledmmError) else f"cannot write {out}: {exc.strerror or exc}"
        print(f"scaledmm merge: error: {reason}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        lock.release()
    if moved is not None:
        print(f"the earlier merged report at {out} ({whose}) is kept as {moved}")
    cases = len(result.report["cases"])
    shards = len(result.report["shard"]["merged"])
    if result.complete:
        line = f"merged {shards} shard(s) into {out}: {cases} case(s), complete"
        _append_summary("merge", line)
        print(line)
        return EXIT_OK
    more = (
        f" (and {len(result.reasons) - 1} more reason(s) in its session.incomplete_reasons)"
        if len(result.reasons) > 1
        else ""
    )
    line = f"merged report {out} is INCOMPLETE: {result.reasons[0]}{more}"
    from .reports.render import md_escape  # noqa: PLC0415 (jinja2 at first use)

    _append_summary("merge", f"**{md_escape(line)}**")
    print(printable(f"scaledmm merge: {line}"), file=sys.stderr)
    return EXIT_GATE_FAILED


@subcommand(
    "init",
    "write a tox.ini (one env per torch release, report, gate) and a CI workflow for this project's matrix",
    [
        Arg(
            "--torch",
            nargs="+",
            required=True,
            metavar="VERSION",
            help="torch releases to test, the pinned one (the baseline) first, e.g. 2.11.0 2.13.0; one release"
            " gates this working tree's kernels against those committed on --base under it",
        ),
        Arg("--matrix", default="matrix.yaml", metavar="PATH", help="the project's matrix file (default: %(default)s)"),
        Arg("--profile", default="default", help="profile the envs and CI run (default: %(default)s)"),
        Arg(
            "--ci",
            nargs="+",
            default=["github"],
            choices=["github", "gitlab", "none"],
            help="CI workflows to write (default: github): .github/workflows/scaledmm.yml, scaledmm.gitlab-ci.yml",
        ),
        Arg(
            "--runners",
            nargs="+",
            default=["gpu"],
            metavar="LABEL",
            help="CI runner labels, one kind of GPU each (default: gpu)",
        ),
        Arg("--shards", type=int, default=2, help="CI jobs per runner and torch release (default: %(default)s)"),
        Arg("--spec", help="what pip installs for pytest-scaledmm (default: where this one was installed from)"),
        Arg(
            "--base",
            default="main",
            metavar="REF",
            help="with one --torch release: the git ref whose committed kernels are the baseline"
            " (default: %(default)s)",
        ),
        Arg("--dir", default=".", help="the project directory (default: the current one)"),
    ],
)
def init_command(args) -> int:

    from .scaffold import make_plan, write_project  # noqa: PLC0415 (fast --help)

    directory = Path(args.dir)
    # An InitError (or a MatrixError: a kernel whose needs it cannot tell) is a ScaledmmError:
    # main prints it as one line, exit status 2.
    plan = make_plan(args.torch, args.matrix, args.profile, args.spec, args.runners, args.shards, directory, args.base)
    written = write_project(directory, plan, [kind for kind in args.ci if kind != "none"])
    for path in written:
        print(f"wrote {path}")
    if plan.spec.startswith("pytest-scaledmm @ file:") and len(written) > 1:
        print(
            f"note: SCALEDMM_SPEC in the CI file is a path on this machine ({plan.spec}):"
            " set it to what your CI can install, e.g. a git URL of your fork (--spec)"
        )
    if plan.kernel_deps:
        print(f"the envs install for the matrix's kernels: {' '.join(plan.kernel_deps)}")
    print(f"next: tox -e {','.join(plan.envs())},report  then  tox -e gate")
    return EXIT_OK
