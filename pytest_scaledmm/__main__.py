"""`python -m pytest_scaledmm` is the `scaledmm` console script."""

from .cli import main

raise SystemExit(main())
