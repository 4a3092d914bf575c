"""What a Strandline process does before its first import of kio."""

import sys


def skip_test_only_imports() -> None:
    """kio registers a hypothesis strategy for each of its primitive types at import
    time whenever hypothesis can be imported, as it can where the tests are installed:
    0.6 s of CPU in every process, for strategies a broker or a tool never draws from.
    Starting three brokers on two cores took 5.0 s (9.6 s of CPU) with it and 1.7 s
    (3.0 s) without. Test processes import kio with hypothesis, as they need it."""
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
