"""A runner defined outside the plugin, for tests/test_runners.py: torch.compile with the
aot_eager backend, whatever the mode row says, under the mode `aot-eager-counted`. Loaded as a
pytest plugin (`-p counted_runner`), it registers both at import."""

from pytest_scaledmm.matrix.compile_modes import CompileMode, register_mode
from pytest_scaledmm.verdict.runners import compile_counted, register_runner

MODE = "aot-eager-counted"
RUNNER = "counted-aot-eager"
BUILDS: list = []  # the settings each build was given


class CountedAotEager:
    name = RUNNER
    marks_m = None
    builds_package = False
    how = "torch.compile(fullgraph=True, backend='aot_eager')"

    def build(self, fn, settings):
        BUILDS.append(dict(settings))
        return compile_counted(fn, {**settings, "backend": "aot_eager"})


register_runner(CountedAotEager())
register_mode(CompileMode(MODE, "eager", runner=RUNNER, doc="aot_eager through a runner of a test's own"))
