"""Several workers on one thread: tombstones and fencing tokens, checked in the write itself.

Each thread that was ever claimed or deleted has one *guard* entry, kept
outside the thread's own namespaces (so deleting the thread keeps it):
``{"token": n, "until": t, "deleted": t}``.

* Every checkpoint write (``put``, ``put_writes``) carries the condition
  "the thread has no guard" (an :class:`~swarmstate.Absent` condition of its
  one ``store.write``), so a thread never claimed nor deleted pays one lookup
  inside its own write transaction.
* When the thread has a guard, the write reads it, decides
  (:meth:`Guards.require`), and writes with the condition "the guard is
  still these bytes" (compare-and-set: a claim or a deletion landing in
  between makes it read and decide again):

  - *fencing*: while a claim is live (``until`` in the future) a write must
    carry the claim's token in ``config["configurable"]["fence"]``; a token
    older than the newest claim is refused for good, live or not, so a
    worker whose claim was taken over can never write again;
  - *tombstone*: after ``delete_thread``, a put of a checkpoint made before
    the deletion (LangGraph's ids carry the time they were made) is refused,
    with or without a parent, and a write that names a checkpoint made
    before the deletion (its parent, or the checkpoint of its pending
    writes) adds the condition "that checkpoint exists": a run that was
    still going when its thread was deleted is refused, while a new run
    under the same id (checkpoints made after the deletion) starts the
    thread afresh and goes on. (Pending writes may reach the store before
    their checkpoint does when the runtime saves in the background, hence
    the time of the id and not only its presence.) What a refused run's
    subgraphs saved meanwhile is taken out by the saver that was refused
    (:class:`Refusals`).

This module says what a write must be conditioned on; the write path
(:mod:`.write`) builds the transaction and makes the write.

Claims compare ``until`` with this machine's clock: keep clocks in sync (a
claim's ttl should be much longer than their skew).
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from swarmstate._base import BaseStore
from swarmstate._checks import ABSENT, Absent, Condition, Holds, Present, Transaction
from swarmstate._codec import dumps, loads
from swarmstate._errors import (
    ConflictError,
    FencedError,
    InvalidArgumentError,
    ThreadDeletedError,
)
from swarmstate.integrations.langgraph import steps
from swarmstate.integrations.langgraph.format import keys

__all__ = ["GUARDS", "Guards", "Refusals", "parsed", "presence", "read"]

GUARDS = keys.ROOT + "g"
"""The namespace of the guards, keyed by ``F(thread_id)``."""
_ATTEMPTS = 20
_HINTS = 4096


_GREGORIAN_TO_UNIX = 0x01B21DD213814000  # 100 ns ticks from 1582-10-15 to 1970-01-01


def made_at(checkpoint_id: str) -> float | None:
    """When a checkpoint id was made (epoch seconds), for LangGraph's UUIDv6 ids; else None."""
    try:
        value = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if value.version != 6:
        return None
    ticks = ((value.int >> 96) << 28) | (((value.int >> 80) & 0xFFFF) << 12)
    ticks |= (value.int >> 64) & 0xFFF
    return (ticks - _GREGORIAN_TO_UNIX) / 1e7


def seconds_of(ttl: datetime.timedelta | float) -> float:
    if isinstance(ttl, datetime.timedelta):
        ttl = ttl.total_seconds()
    if type(ttl) not in (int, float) or not ttl > 0:
        raise InvalidArgumentError(f"ttl must be a positive number of seconds, got {ttl!r}")
    return float(ttl)


def read(thread_id: str) -> steps.Items:
    """The step that reads a thread's guard entry (sent back to :func:`parsed`)."""
    return steps.Items(GUARDS, start=keys.field(thread_id), limit=1)


def parsed(thread_id: str, rows: list[tuple[str, bytes]]) -> tuple[bytes | None, dict[str, Any]]:
    """A thread's guard, as stored and decoded, from what :func:`read` read."""
    if rows and rows[0][0] == keys.field(thread_id):
        guard = loads(rows[0][1])
        if type(guard) is dict:
            return rows[0][1], guard
    return None, {"token": 0, "until": None, "deleted": None}


def _read_plan(thread_id: str) -> steps.Plan[tuple[bytes | None, dict[str, Any]]]:
    return parsed(thread_id, (yield read(thread_id)))


def presence(conditions: Sequence[Present | Holds]) -> steps.GetMany:
    """The step that reads the entries ``conditions`` name (None where one is missing)."""
    return steps.GetMany([(c.namespace, c.key) for c in conditions])


class Guards:
    """Guard entries of one store: checks around checkpoint writes, claims, tombstones."""

    def __init__(self, store: BaseStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self.guarded: set[str] = set()
        """Threads last seen with a guard: their writes read it first instead of trying
        "no guard" in vain. Only a hint: a stale entry costs one attempt."""

    def _read(self, thread_id: str) -> tuple[bytes | None, dict[str, Any]]:
        return steps.run(self.store, _read_plan(thread_id))

    def seen(self, thread_id: str, stored: bytes | None) -> None:
        """Note whether the thread was just seen with a guard (:attr:`guarded`)."""
        if stored is None:
            self.guarded.discard(thread_id)
        elif len(self.guarded) < _HINTS:
            self.guarded.add(thread_id)

    def require(
        self,
        thread_id: str,
        stored: bytes | None,
        guard: dict[str, Any],
        fence: int | None,
        built_on: list[tuple[str, str]],
        made: str | None,
    ) -> tuple[Condition, list[Present]]:
        """What a write of the thread must be conditioned on, its guard read as ``stored``
        (:func:`parsed`): the guard as read, and the checkpoints a tombstone asks for.

        ``fence``, ``built_on`` and ``made`` as the write path passes them: the
        write's fencing token; the ``(namespace, checkpoint id)`` the write
        builds on (a put's parent, the checkpoint of pending writes, and the
        checkpoints of the enclosing namespaces a subgraph runs under); the id
        of the checkpoint a put writes.

        Raises:
            FencedError: The thread's claim refuses this write.
            ThreadDeletedError: The thread was deleted after the checkpoint a
                put writes was made.
        """
        tombstone: list[Present] = []
        if stored is None:
            return Absent(GUARDS, keys.field(thread_id)), tombstone
        self._admit(thread_id, guard, fence)
        deleted = guard.get("deleted")
        if deleted is not None:
            written_at = made_at(made) if made is not None else None
            if written_at is not None and written_at <= float(deleted):
                # Made before the deletion, by the run it ended, whose put was
                # still in flight: with or without a parent, not a new run.
                raise ThreadDeletedError(
                    f"thread {thread_id!r} was deleted after checkpoint {made!r} "
                    "was made: the run that made it cannot go on; start a new run "
                    "(without a checkpoint_id) to reuse the thread id"
                )
            for namespace, checkpoint_id in built_on:
                built_at = made_at(checkpoint_id)
                if built_at is None or built_at <= float(deleted):
                    tombstone.append(Present(namespace, keys.checkpoint_key(checkpoint_id)))
        return Holds(GUARDS, keys.field(thread_id), stored), tombstone

    def deleted(self, thread_id: str) -> bool:
        """Whether the thread was ever deleted (it has a tombstone)."""
        return self.deleted_at(thread_id) is not None

    def deleted_at(self, thread_id: str) -> float | None:
        """When the thread was last deleted (epoch seconds), or None."""
        stored, guard = self._read(thread_id)
        deleted = guard.get("deleted") if stored is not None else None
        return float(deleted) if deleted is not None else None

    def _admit(self, thread_id: str, guard: dict[str, Any], fence: int | None) -> None:
        """Raise :class:`FencedError` unless a write with ``fence`` may go ahead."""
        token = int(guard.get("token") or 0)
        until = guard.get("until")
        live = until is not None and float(until) > self.clock()
        if fence is not None and fence < token:
            raise FencedError(
                f"thread {thread_id!r} was claimed again (token {token}) after this run's "
                f"claim (token {fence}): this run may not write it any more"
            )
        if fence is not None and fence > token:
            raise FencedError(
                f"thread {thread_id!r} never issued fencing token {fence} (its newest is "
                f"{token}); pass the token claim() returned"
            )
        if live and fence is None:
            left = float(until or 0.0) - self.clock()
            raise FencedError(
                f"thread {thread_id!r} is claimed (token {token}) for another "
                f"{left:.1f} s: write with config['configurable']['fence'] "
                "set to the claim's token, or wait for release() or the ttl"
            )

    def _swap(
        self,
        thread_id: str,
        change: Callable[[dict[str, Any]], dict[str, Any] | None],
        *,
        deletes: list[tuple[str, str]] | None = None,
        prefix_deletes: list[str] | None = None,
        absent_first: bool = False,
    ) -> Any:
        """Apply ``change`` to the guard with compare-and-set; returns the new guard (or None).

        ``deletes`` and ``prefix_deletes`` go in the same transaction as the
        new guard, all or nothing. ``absent_first``: the first attempt
        assumes no guard without reading it (most threads never had one), so
        that attempt is one round trip; a guard it meets refuses the write,
        which is then read and tried again.
        """
        key = keys.field(thread_id)
        for attempt in range(_ATTEMPTS):
            if attempt == 0 and absent_first:
                raw, guard = parsed(thread_id, [])
            else:
                raw, guard = self._read(thread_id)
            new = change(dict(guard))
            if new is None:
                return None
            try:
                if deletes is None and prefix_deletes is None:
                    self.store.set_many(
                        [(GUARDS, key, dumps(new))],
                        raw=True,
                        require=[(GUARDS, key, raw if raw is not None else ABSENT)],
                    )
                else:
                    self.store.write(
                        Transaction(
                            conditions=[
                                Holds(GUARDS, key, raw) if raw is not None else Absent(GUARDS, key)
                            ],
                            sets=[(GUARDS, key, dumps(new))],
                            deletes=deletes or (),
                            prefix_deletes=prefix_deletes or (),
                            raw=True,
                        )
                    )
                return new
            except ConflictError:
                continue
        raise ConflictError(f"thread {thread_id!r}: its guard kept changing; try again")

    def claim(self, thread_id: str, ttl: float) -> int:
        """A new fencing token for ``thread_id``, live for ``ttl`` seconds."""
        now = self.clock()

        def change(guard: dict[str, Any]) -> dict[str, Any]:
            guard["token"] = int(guard.get("token") or 0) + 1
            guard["until"] = now + ttl
            return guard

        return int(self._swap(thread_id, change)["token"])

    def renew(self, thread_id: str, token: int, ttl: float) -> None:
        """Extend the claim ``token`` for ``ttl`` seconds from now; it must be the newest claim."""
        now = self.clock()

        def change(guard: dict[str, Any]) -> dict[str, Any]:
            newest = int(guard.get("token") or 0)
            if token != newest:
                raise FencedError(
                    f"thread {thread_id!r}: token {token} is not its newest claim "
                    f"(token {newest}); a claim taken over cannot be renewed"
                )
            if guard.get("until") is None:
                raise FencedError(
                    f"thread {thread_id!r}: claim {token} was released; claim() it again"
                )
            guard["until"] = now + ttl
            return guard

        self._swap(thread_id, change)

    def release(self, thread_id: str, token: int) -> bool:
        """End the claim ``token``; False when it is not the newest claim (nothing changes)."""

        def change(guard: dict[str, Any]) -> dict[str, Any] | None:
            if guard.get("token") != token or guard.get("until") is None:
                return None
            guard["until"] = None
            return guard

        return self._swap(thread_id, change) is not None

    def tombstone(
        self, thread_id: str, deletes: list[tuple[str, str]], prefix_deletes: list[str]
    ) -> None:
        """Mark the thread deleted and delete its entries, in one transaction.

        The guard keeps its token counter. ``deletes`` and ``prefix_deletes``
        are the thread's entries; a write of the thread racing this one lands
        before it (and goes with the thread) or meets the tombstone.
        """

        def change(guard: dict[str, Any]) -> dict[str, Any]:
            guard["deleted"] = self.clock()
            return guard

        self._swap(
            thread_id, change, deletes=deletes, prefix_deletes=prefix_deletes, absent_first=True
        )


class Refusals:
    """What one saver learned from the tombstones that refused its writes.

    A graph saves in the background (LangGraph's default durability), each
    graph and subgraph in its own order: when a node deletes its thread, the
    run's puts still in flight are refused, and once one is, the enclosing
    graph's later puts never come (each waits for the one before). A
    subgraph's checkpoints, made after the deletion, run under such an
    enclosing checkpoint, and usually reach the saver before the enclosing
    put would have. They belong to the refused run when:

    * what they build on was refused or taken out (:attr:`checkpoints`), or
    * they run under an enclosing checkpoint that is not stored and was not
      made after the first top-level checkpoint this saver was given for the
      thread with an id made after the deletion (the start of a run that went
      on, or of a new one, whose enclosing puts are on their way).

    Only a thread with a refusal in this saver pays for the look-up.
    """

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self.checkpoints: set[tuple[str, str]] = set()
        """``(namespace, checkpoint id)`` refused or taken out: writes on them are refused."""
        self.deleted: dict[str, float] = {}
        """Per thread, when the deletion that refused a write of this saver was."""
        self._fresh: dict[str, float] = {}

    def refused(
        self, thread_id: str, deleted: float | None, pairs: Iterable[tuple[str, str]]
    ) -> bool:
        """Record a refusal by the tombstone of ``deleted`` and what it took out.

        Returns whether that deletion is new to this saver: then the caller
        tells :meth:`started` of a run already stored since.
        """
        if len(self.checkpoints) > _HINTS:
            self.checkpoints.clear()
        self.checkpoints.update(pairs)
        if deleted is None or self.deleted.get(thread_id) == deleted:
            return False
        if len(self.deleted) > _HINTS:
            self.deleted.clear()
            self._fresh.clear()
        self.deleted[thread_id] = deleted
        self._fresh.pop(thread_id, None)
        return True

    def started(self, thread_id: str, checkpoint_id: str) -> None:
        """Note a top-level checkpoint of the thread: one made after its deletion starts a
        run that is not the refused one (no put of that run made after the deletion lands)."""
        deleted = self.deleted.get(thread_id)
        made = made_at(checkpoint_id)
        if deleted is None or made is None or made <= deleted:
            return
        fresh = self._fresh.get(thread_id)
        if fresh is None or made < fresh:
            self._fresh[thread_id] = made

    def fresh(self, thread_id: str) -> float | None:
        """When the thread's first top-level checkpoint made after its deletion was made."""
        return self._fresh.get(thread_id)

    def orphaned(
        self,
        thread_id: str,
        namespace: str,
        built_on: list[tuple[str, str]],
        checkpoint_id: str | None = None,
    ) -> bool:
        """Whether a write belongs to a run a tombstone refused (see the class).

        ``built_on`` as a :class:`.write.Scope` holds it; ``namespace`` is the
        write's own; ``checkpoint_id``: the checkpoint a put writes (None for
        pending writes, whose own checkpoint must then be stored or coming).
        """
        deleted = self.deleted.get(thread_id)
        if deleted is None:
            return False
        checkpoints = self.checkpoints
        if any(pair in checkpoints for pair in built_on):
            return True
        if checkpoint_id is None:
            waiting = built_on  # pending writes: their checkpoint's put may never come
        else:
            waiting = [pair for pair in built_on if pair[0] != namespace]
            if not waiting:
                self.started(thread_id, checkpoint_id)
                return False
        fresh = self._fresh.get(thread_id)
        for outer, outer_id in waiting:
            made = made_at(outer_id)
            if made is None or (fresh is not None and made >= fresh):
                continue
            if self.store.get_many([(outer, keys.checkpoint_key(outer_id))], raw=True)[0] is None:
                return True
        return False
