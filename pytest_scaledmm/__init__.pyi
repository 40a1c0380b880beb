# What a type checker sees of the package: __init__.py resolves these names on first use through
# its module __getattr__, which a checker reads as Any. A stub, not `if TYPE_CHECKING:` imports in
# __init__.py: execution/device.py imports the package (for __version__), and an import of
# reports.report here, even a type-only one, would be an upward import of the execution layer.
from .errors import ScaledmmError as ScaledmmError
from .matrix.errors import MatrixError as MatrixError
from .matrix.kernels import Kernel as Kernel
from .reports.report import ReportError as ReportError

__version__: str
__all__ = ["Kernel", "MatrixError", "ReportError", "ScaledmmError", "__version__"]

def __dir__() -> list[str]: ...
