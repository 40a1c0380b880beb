"""`scaledmm compare`'s output formats come from one table (cli.RENDERERS): a format added as
one row gets its flag, its file and the output-safety checks of the others."""

import csv
import io
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from reports_factory import case, report, write

from pytest_scaledmm import cli

CSV_MARK = "report,id,outcome"


def _csv(comparison, matrix, args) -> str:
    out = io.StringIO()
    out.write(CSV_MARK + "\n")
    rows = csv.writer(out, lineterminator="\n")
    for i, column in enumerate(comparison.columns):
        for cid in comparison.case_ids:
            record = comparison.grid[cid][i]
            if record is not None:
                rows.writerow([column.label, cid, record["outcome"]])
    return out.getvalue()


CSV = cli.ReportFormat("csv", "--csv", "write each report's case id and outcome as CSV", CSV_MARK, _csv)


@pytest.fixture
def with_csv(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setattr(cli, "RENDERERS", (*cli.RENDERERS, CSV))


@pytest.fixture
def two_reports(tmp_path):
    r1 = write(tmp_path / "r1.json", report([case("a", "PASS"), case("b", "PASS")], torch="2.11.0+cpu"))
    r2 = write(tmp_path / "r2.json", report([case("a", "PASS"), case("b", "COMPILE_ERROR", "boom")]))
    return r1, r2


def test_a_format_added_as_one_row_is_written(with_csv, two_reports, tmp_path, capsys):
    out = tmp_path / "out.csv"
    assert cli.main(["compare", "--csv", str(out), *map(str, two_reports)]) == cli.EXIT_OK
    lines = out.read_text().splitlines()
    assert lines[0] == CSV_MARK
    rows = list(csv.reader(lines[1:]))
    assert [row[1:] for row in rows] == [["a", "PASS"], ["b", "PASS"], ["a", "PASS"], ["b", "COMPILE_ERROR"]]
    assert f"csv: {out}" in capsys.readouterr().out.splitlines()
    # Its own earlier file is replaced.
    assert cli.main(["compare", "--csv", str(out), *map(str, two_reports)]) == cli.EXIT_OK


def test_the_added_format_is_in_the_help(with_csv, capsys):
    with pytest.raises(SystemExit):
        cli.main(["compare", "--help"])
    assert "--csv PATH" in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--csv", "--markdown", "--html"])
def test_every_format_refuses_to_overwrite_a_report(with_csv, two_reports, flag, capsys):
    r1, r2 = two_reports
    before = r1.read_bytes()
    assert cli.main(["compare", flag, str(r1), str(r1), str(r2)]) == cli.EXIT_USAGE
    assert r1.read_bytes() == before
    assert f"{flag} {r1}: it is a pytest-scaledmm report" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--csv", "--markdown", "--html"])
def test_every_format_refuses_a_file_it_did_not_write(with_csv, two_reports, tmp_path, flag, capsys):
    other = tmp_path / "notes.txt"
    other.write_text("mine\n")
    assert cli.main(["compare", flag, str(other), *map(str, two_reports)]) == cli.EXIT_USAGE
    assert other.read_text() == "mine\n"
    assert "was not written by scaledmm compare" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--csv", "--markdown", "--html"])
def test_a_file_that_only_mentions_the_mark_is_not_one_of_ours(with_csv, two_reports, tmp_path, flag, capsys):
    """Notes on the CI that quote what compare writes are the user's: the mark must stand where
    the format puts it (the first line of Markdown, a line of its own in HTML and CSV)."""
    mark = next(row.mark for row in cli.RENDERERS if row.flag == flag)
    notes = tmp_path / "ci-notes.md"
    text = f"# Our CI\n\nThe summary step writes `{mark}` first; keep this page.\n"
    notes.write_text(text)
    assert cli.main(["compare", flag, str(notes), *map(str, two_reports)]) == cli.EXIT_USAGE
    assert notes.read_text() == text
    err = capsys.readouterr().err
    assert err == (
        f"scaledmm compare: error: {flag} {notes}: it is there and was not written by scaledmm compare:"
        " it is never overwritten\n"
    )
    # What compare wrote there itself is still replaced.
    notes.unlink()
    assert cli.main(["compare", flag, str(notes), *map(str, two_reports)]) == cli.EXIT_OK
    assert cli.main(["compare", flag, str(notes), *map(str, two_reports)]) == cli.EXIT_OK


@pytest.mark.parametrize("flag", ["--csv", "--markdown", "--html"])
def test_every_format_refuses_a_directory(with_csv, two_reports, tmp_path, flag, capsys):
    assert cli.main(["compare", flag, str(tmp_path), *map(str, two_reports)]) == cli.EXIT_USAGE
    assert "it is a directory; name a file" in capsys.readouterr().err


def test_two_formats_naming_one_file_are_refused(with_csv, two_reports, tmp_path, capsys):
    out = tmp_path / "out.txt"
    assert cli.main(["compare", "--html", str(out), "--csv", str(out), *map(str, two_reports)]) == cli.EXIT_USAGE
    assert f"--csv {out}: --html names the same file" in capsys.readouterr().err
    assert not out.exists()


def test_markdown_and_html_still_write_and_print(with_csv, two_reports, tmp_path, capsys):
    md, html = tmp_path / "c.md", tmp_path / "c.html"
    args = ["compare", "--markdown", str(md), "--html", str(html), *map(str, two_reports)]
    assert cli.main(args) == cli.EXIT_OK
    assert md.read_text().startswith("## scaled-mm compatibility matrix")
    assert '<meta name="generator" content="pytest-scaledmm compare">' in html.read_text()
    assert capsys.readouterr().out.splitlines()[-2:] == [f"markdown: {md}", f"html: {html}"]
    assert cli.main(["compare", "--markdown", "-", *map(str, two_reports)]) == cli.EXIT_OK
    assert "## scaled-mm compatibility matrix" in capsys.readouterr().out


def test_an_added_format_printed_to_stdout_is_escaped_for_the_terminal(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    printed = cli.ReportFormat("csv", "--csv", "CSV", CSV_MARK, _csv, stdout=True)
    monkeypatch.setattr(cli, "RENDERERS", (*cli.RENDERERS, printed))
    base = write(tmp_path / "base.json", report([case("a", "PASS")]))
    evil = write(tmp_path / "evil.json", report([case("a\x1b[31m", "PASS")]))
    assert cli.main(["compare", "--csv", "-", str(base), str(evil)]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "\x1b" not in out and "a\\x1b[31m" in out


def test_a_format_whose_output_lacks_its_mark_is_refused(monkeypatch, two_reports, tmp_path, capsys):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    unmarked = cli.ReportFormat("csv", "--csv", "CSV", "no such mark", _csv)
    monkeypatch.setattr(cli, "RENDERERS", (*cli.RENDERERS, unmarked))
    out = tmp_path / "out.csv"
    assert cli.main(["compare", "--csv", str(out), *map(str, two_reports)]) == 2
    assert not out.exists()
    assert "--csv: its renderer's output does not begin with its mark" in capsys.readouterr().err


def _fifo_holding(path, text: str) -> int:
    """A FIFO at `path` with `text` waiting in it; the returned descriptor keeps it open."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # never waits for a reader
    os.write(fd, text.encode())
    return fd


@pytest.mark.parametrize("flag", ["--markdown", "--html"])
def test_a_fifo_or_socket_is_refused_unread(two_reports, tmp_path, monkeypatch, flag, capsys):
    """Reading a FIFO for the mark waits for a writer (forever, at /dev/stdout on a pipe); this
    one holds the mark, so read it would have been replaced by a regular file."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    mark = next(row.mark for row in cli.RENDERERS if row.flag == flag)
    fifo = tmp_path / "out.fifo"
    fd = _fifo_holding(fifo, mark + "\n")
    try:
        assert cli.main(["compare", flag, str(fifo), *map(str, two_reports)]) == cli.EXIT_USAGE
        assert capsys.readouterr().err == f"scaledmm compare: error: {flag} {fifo}: it is a FIFO; name a regular file\n"
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.read(fd, 4096) == (mark + "\n").encode()
    finally:
        os.close(fd)
    monkeypatch.chdir(tmp_path)  # a relative name: a socket's path has a short limit
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("out.sock")
        assert cli.main(["compare", flag, "out.sock", *map(str, two_reports)]) == cli.EXIT_USAGE
    assert capsys.readouterr().err.endswith(": it is a socket; name a regular file\n")


def _cli(*args, stdout) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "pytest_scaledmm", *map(str, args)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=300,  # a guard: waiting on the pipe for a writer would never end
    )


@pytest.mark.parametrize("flag", ["--markdown", "--html"])
def test_dev_stdout_and_dev_null_are_written_in_place(two_reports, tmp_path, flag):
    """/dev/stdout is the step log, a pipe or a file: written there after nothing it holds, never
    read for a mark nor renamed over; /dev/null takes it."""
    mark = next(row.mark for row in cli.RENDERERS if row.flag == flag)
    log = tmp_path / "step.log"
    with open(log, "w") as handle:
        handle.write("earlier step\n")
        handle.flush()
        done = _cli("compare", flag, "/dev/stdout", *two_reports, stdout=handle)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    text = log.read_text()
    assert text.startswith("earlier step\n") and mark in text
    assert text.rstrip().endswith(f"{flag.lstrip('-')}: /dev/stdout")  # the summary after it, not over it
    piped = _cli("compare", flag, "/dev/stdout", *two_reports, stdout=subprocess.PIPE)
    assert piped.returncode == 0 and mark in piped.stdout, piped.stderr
    assert os.path.islink("/dev/stdout") or stat.S_ISCHR(os.stat("/dev/stdout").st_mode)
    assert cli.main(["compare", flag, "/dev/null", *map(str, two_reports)]) == cli.EXIT_OK
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
