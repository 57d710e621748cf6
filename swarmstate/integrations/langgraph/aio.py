"""The async half of SwarmStateSaver: one implementation with the sync half.

``aput`` and ``aput_writes`` await the same plans (:mod:`.steps`) that
``put`` and ``put_writes`` run: their Python work runs on the event loop,
between awaited store calls (PostgresStore's async pool when it is open on
the loop, a worker thread for a blocking store, inline for the in-memory
store), so a worker thread never holds the interpreter for a whole put
while the loop waits. The other methods run their sync twin: directly on
the in-memory store (which never blocks), in a worker thread
(``asyncio.to_thread``) otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from swarmstate._base import BaseStore
from swarmstate.integrations.langgraph import steps
from swarmstate.integrations.langgraph.config import materialize

__all__ = ["AsyncMethods"]

_T = TypeVar("_T")


class AsyncMethods(BaseCheckpointSaver[str]):
    """Async wrappers over the sync methods of a checkpointer subclass."""

    store: BaseStore
    _async_inline: bool
    """True when the sync methods never block (the in-memory store)."""

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
    ) -> None:
        raise NotImplementedError  # the subclass implements it

    def _put_plan(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> steps.Plan[RunnableConfig]:
        raise NotImplementedError  # the subclass implements it

    def _put_writes_plan(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> steps.Plan[None]:
        raise NotImplementedError  # the subclass implements it

    def _get_tuple_plan(self, config: RunnableConfig) -> steps.Plan[CheckpointTuple | None]:
        raise NotImplementedError  # the subclass implements it

    async def _run(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        if self._async_inline:
            return fn(*args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`: the same plan, its store calls awaited."""
        return await steps.arun(self.store, self._get_tuple_plan(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`; results are fetched before the first one is yielded."""
        rows = await self._run(
            materialize, self.list, config, filter=filter, before=before, limit=limit
        )
        for row in rows:
            yield row

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`: the same plan, its store calls awaited."""
        plan = self._put_plan(config, checkpoint, metadata, new_versions)
        return await steps.arun(self.store, plan)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`: the same plan, its store calls awaited."""
        await steps.arun(self.store, self._put_writes_plan(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await self._run(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        await self._run(self.copy_thread, source_thread_id, target_thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await self._run(self.delete_for_runs, run_ids)

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
    ) -> None:
        """Async :meth:`prune`."""
        await self._run(self.prune, thread_ids, strategy=strategy, keep_last=keep_last)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async :meth:`get_delta_channel_history`."""
        return await self._run(
            lambda: self.get_delta_channel_history(config=config, channels=channels)
        )
