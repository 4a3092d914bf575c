"""The purgatory tells a parked request which key woke it."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from strandline.server.purgatory import Purgatory


def test_a_wake_up_names_its_key_and_the_first_check_names_none() -> None:
    seen: list[Hashable | None] = []

    async def run() -> bool:
        purgatory = Purgatory("test")
        remaining = {"a", "b"}

        def check(key: Hashable | None) -> bool:
            seen.append(key)
            if key is not None:
                remaining.discard(str(key))
            return not remaining

        waiter = asyncio.create_task(purgatory.wait(["a", "b"], check, 5.0))
        await asyncio.sleep(0)
        purgatory.notify("a")
        purgatory.notify("c")  # not waited on: not checked
        purgatory.notify("b")
        return await waiter

    assert asyncio.run(run()) is True
    assert seen == [None, "a", "b"]
