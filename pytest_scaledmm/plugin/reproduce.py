"""pytest side of reproducing failures: replay by case id, repro scripts written as failures
arrive, explore mode's findings added to the corpus, and their summary lines."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pytest

from ..execution.triage import summary_lines
from ..matrix.cases import generate_cases
from ..matrix.errors import MatrixError
from ..reports.printable import printable
from ..reports.repro import ReproWriter
from .explore import corpus_entry, save_corpus

if TYPE_CHECKING:
    from ..matrix.spec import Profile
    from .session import MatrixSession


def check_case_ids(state: MatrixSession, wanted: Iterable[str], label: str = "--scaledmm-case") -> None:
    """Every requested id must be a case of this matrix and profile (and shard); otherwise one
    usage error, naming `label` (where the ids came from), the profile or shard that has it, or
    the closest ids."""

    ids = [case.id for case in state.cases()]
    known = set(ids)
    shard: tuple[int, int] | None = getattr(state.settings, "shard", None)
    whole = {case.id for case in generate_cases(state.spec, state.profile, state.target_arch)[0]} if shard else known
    problems = []
    # Ids of each profile with cases, generated once: a composite has those of its parts (and
    # the included cases, which every profile has and so are known already).
    leaf_ids: dict[str, set] = {}

    def has(profile: Profile, cid: str) -> bool:
        for part in profile.leaves:
            if part.name not in leaf_ids:
                leaf_ids[part.name] = {c.id for c in generate_cases(state.spec, part, state.target_arch)[0]}
            if cid in leaf_ids[part.name]:
                return True
        return False

    for cid in wanted:
        if cid in known:
            continue
        if shard is not None and cid in whole:
            problems.append(
                f"case id {cid!r} is not in shard {shard[0]}/{shard[1]}: another shard runs it"
                " (leave out --scaledmm-shard to run it)"
            )
            continue
        line = f"unknown case id {cid!r} in profile {state.profile.name!r} of {state.spec.path}"
        elsewhere = []
        for name, profile in state.spec.profiles.items():
            if name != state.profile.name and has(profile, cid):
                elsewhere.append(name)
        if elsewhere:
            line += f"; it is a case of profile {', '.join(elsewhere)}: add --scaledmm-profile {elsewhere[0]}"
        else:
            close = difflib.get_close_matches(cid, ids, n=5, cutoff=0.5)
            if close:
                line += "; close matches:\n    " + "\n    ".join(close)
        problems.append(line)
    if problems:
        raise pytest.UsageError(f"{label}: " + "\n".join(problems))


class ReproducePlugin:
    """--scaledmm-case selection where cases are collected; repro scripts and the corpus on the
    controller, as records come in."""

    def __init__(self, state: MatrixSession) -> None:
        self.state = state
        settings = state.settings
        self.wanted = set(settings.cases)
        self.writer = None
        self.corpus_entries: list[dict] = []
        self.corpus_added: int | None = None
        self.corpus_error: str | None = None
        if settings.repro_dir and not settings.worker:
            self.writer = ReproWriter(
                settings.repro_dir,
                state.spec,
                state.kernels(),
                settings.timeout,
                settings.max_autotune_configs,
                state.import_dirs,
            )

    def _controller(self) -> bool:
        return not self.state.settings.worker

    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """--scaledmm-case: keep exactly those cases. Ids are those of the full collection, since
        deselection happens after every case was collected."""
        if not self.wanted:
            return
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            case = getattr(item, "case", None)
            (drop if case is not None and case.id not in self.wanted else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" or not self._controller():
            return
        # What the case items put there, as JSON: records are plain dicts until the writer types them.
        properties: dict[str, Any] = dict(report.user_properties)
        records = []
        if "scaledmm" in properties:
            records.append(properties["scaledmm"])
        if "scaledmm_explore" in properties:
            env = properties.get("scaledmm_env") or self.state.environment

            for record in properties["scaledmm_explore"]:
                self.state.add_record(record)
                self.corpus_entries.append(corpus_entry(record, env))
                records.append(record)
        if self.writer is not None:
            env = properties.get("scaledmm_env") or self.state.environment or {}
            for record in records:
                self.writer.add(record, env, self.state.seed)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        explore = self.state.settings.explore
        if self._controller() and self.corpus_entries and explore is not None:
            # Checked at configure; changed since, it costs one line, the findings stay in the report.
            try:
                self.corpus_added = save_corpus(explore.corpus, self.corpus_entries)
            except (MatrixError, OSError) as exc:
                self.corpus_error = str(exc) if isinstance(exc, MatrixError) else f"{explore.corpus}: {exc}"

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter, exitstatus: pytest.ExitCode, config: pytest.Config
    ) -> None:
        if not self._controller():
            return

        lines = summary_lines(self.state.records.values())
        if self.writer is not None:
            lines += self.writer.summary_lines()
        explore = self.state.settings.explore
        if self.corpus_added is not None and explore is not None:
            lines.append(
                f"corpus: {self.corpus_added} new minimal case(s) in {explore.corpus}"
                " (list it under `include:` in matrix.yaml to replay them)"
            )
        if self.corpus_error is not None:
            lines.append(
                f"corpus: not saved ({self.corpus_error});"
                f" the {len(self.corpus_entries)} minimal case(s) are in the report"
            )
        if lines:
            terminalreporter.section("scaled-mm triage and repro")

            for line in lines:
                terminalreporter.write_line(printable(line))
