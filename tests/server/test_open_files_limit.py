"""The broker raises its open-files limit at start-up as far as it may (docs/scaling.md)."""

from __future__ import annotations

import resource

from strandline.server.broker import raise_open_files_limit


def test_the_limit_is_raised_up_to_the_hard_limit_and_never_lowered() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        lowered = max(64, soft // 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
        assert raise_open_files_limit(16) == lowered  # enough already: unchanged
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == lowered
        reached = raise_open_files_limit(soft)
        assert reached == soft  # up to what was allowed before
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == soft
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
