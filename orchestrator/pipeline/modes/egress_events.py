"""The one place refused connections enter a turn's stream: `sandbox/egress_denied` events.

While a runner turn runs in an isolated sandbox, the denials the egress proxy logs for that box
are emitted as they arrive. The proxy's log reaches Cage a few milliseconds after the refusal, so
when the turn's process has ended the subscription stays open until Cage has read the log up to
that moment (`EgressDenials.settle`, at most `SETTLE_SECONDS`): a CLI whose last act was a refused
request still gets its event before `stream_end`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from orchestrator.sandbox.egress.denials import backend_denials
from orchestrator.sandbox.manager import SandboxLease, SandboxManager
from orchestrator.stream import Emit, TurnBuilder

SETTLE_SECONDS = 0.3


@asynccontextmanager
async def egress_events(
    manager: SandboxManager, lease: SandboxLease, builder: TurnBuilder, emit: Emit
) -> AsyncIterator[None]:
    """Emit the lease's egress denials while the block runs (and until the log is read past its end)."""
    hub = backend_denials(manager.backend)
    if hub is None or not lease.isolated:
        yield
        return
    with hub.subscribe(lease.identity.name) as received:

        async def pump() -> None:
            async for denial in received:
                await emit(builder.egress_denied(denial.host, denial.port, denial.method))

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(pump)
                try:
                    yield
                    await hub.settle(SETTLE_SECONDS)
                finally:
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The task group wraps the turn's own error (a `SandboxNotFound` when the box went
            # away, say): give it back unwrapped, so the turn fails with that error, not as a
            # crash inside the orchestrator.
            if len(group.exceptions) != 1:
                raise
            inner = group.exceptions[0]
            raise inner from inner.__cause__
