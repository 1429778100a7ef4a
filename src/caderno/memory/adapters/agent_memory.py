"""The ``AgentMemory`` port for any adapter, and ``InMemoryAgentMemory``, its test fake.

The ``AgentMemory`` contract (docs/architecture.md) promises that a chat runs on *any* object with four
methods — ``get_messages``, ``append_messages``, ``get_working_memory``,
``update_working_memory`` — and that the adapter decides how. So
``bind_agent_memory`` takes such an object as it is and gives ``AgentChat``
the one shape it calls (``caderno.AgentMemory``: async, keyword arguments):

- **Sync or async, per method.** Whatever a method returns that can be
  awaited is awaited; anything else is the answer. A sync method runs on the
  event loop's thread (not in a worker thread, so an adapter over a
  thread-bound connection, such as ``sqlite3``'s, keeps working): keep it
  quick, or make it async.
- **With or without ``resource_id``.** Each method's signature is read once,
  when the adapter is bound. One that names ``resource_id`` (or takes
  ``**kwargs``) is called with keywords, as ``Memory`` is. One that does not
  is called positionally in the contract's order:
  ``get_messages(thread_id, limit)``, ``append_messages(thread_id, messages)``,
  ``get_working_memory(resource_id)``, ``update_working_memory(resource_id, patch)``.
  The thread methods then never see the resource: a thread id alone names
  the conversation, and **the owner check is the adapter's** — it must keep
  one resource from reading or appending to another's thread (unique thread
  ids, or its own check). ``Memory`` checks ownership itself.
- **``append_messages`` may return nothing** (the design's ``void``): the
  turn then counts as stored as it was sent. A returned list of as many
  messages is taken as the stored turn.

An adapter's messages need no ``position``: ``AgentChat`` shows them in the
order ``get_messages`` returns them (oldest first).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ...core.errors import UsageError
from ...core.messages import Message
from ..facade import AgentMemory
from ..parts.working_memory import check_patch, merge_patch

__all__ = ["InMemoryAgentMemory", "bind_agent_memory"]

_FOUR = ("get_messages", "append_messages", "get_working_memory", "update_working_memory")


class InMemoryAgentMemory:
    """``AgentMemory`` over two dicts: messages per (resource, thread), working memory per resource.

    The design's test fake, and a reference for writing an adapter: no store,
    no ids or times assigned, no coercion — messages are kept and returned as
    given, patches merged with caderno's ``merge_patch`` (RFC 7396). Nothing
    survives the process; for that, use ``caderno.connect``.
    """

    def __init__(self) -> None:
        self.messages: dict[tuple[str, str], list[Message]] = {}
        """Each thread's messages, oldest first, keyed by (resource_id, thread_id)."""
        self.working_memory: dict[str, dict[str, Any]] = {}
        """Each resource's working memory object."""

    async def get_messages(self, *, resource_id: str, thread_id: str, limit: int | None = None) -> list[Message]:
        """The thread's messages, oldest first; ``limit`` keeps the newest N."""
        found = self.messages.get((resource_id, thread_id), [])
        if limit is None:
            return list(found)
        return list(found[-limit:]) if limit > 0 else []

    async def append_messages(self, *, resource_id: str, thread_id: str, messages: Sequence[Message]) -> list[Message]:
        """Append the messages to the thread as they are; returns them."""
        self.messages.setdefault((resource_id, thread_id), []).extend(messages)
        return list(messages)

    async def get_working_memory(self, *, resource_id: str) -> dict[str, Any] | None:
        """The resource's working memory, or ``None`` when never set."""
        return self.working_memory.get(resource_id)

    async def update_working_memory(
        self, *, resource_id: str, patch: dict[str, Any], expected_version: int | None = None
    ) -> dict[str, Any]:
        """Merge the patch into the resource's working memory; returns the result.

        Raises:
            InvalidPatch: the patch is not a JSON object; nothing changes.
            UsageError: an ``expected_version`` (this fake keeps no versions).
        """
        if expected_version is not None:
            raise UsageError(
                "InMemoryAgentMemory keeps no versions: call update_working_memory without expected_version"
            )
        merged = merge_patch(self.working_memory.get(resource_id, {}), check_patch(patch, resource_id))
        self.working_memory[resource_id] = merged
        return dict(merged)


def bind_agent_memory(adapter: Any) -> AgentMemory:
    """``adapter``'s four methods as caderno calls them (see the module docstring for the rules)."""
    return _Bound(adapter)


class _Bound:
    """An adapter's four methods, each read once: async or not, with ``resource_id`` or not."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        self._keywords = {name: _takes_resource_id(getattr(adapter, name)) for name in _FOUR}

    async def get_messages(self, *, resource_id: str, thread_id: str, limit: int | None = None) -> list[Message]:
        if self._keywords["get_messages"]:
            found = await _answer(self.adapter.get_messages(resource_id=resource_id, thread_id=thread_id, limit=limit))
        else:
            found = await _answer(self.adapter.get_messages(thread_id, limit))
        return [] if found is None else list(found)

    async def append_messages(self, *, resource_id: str, thread_id: str, messages: Sequence[Message]) -> list[Message]:
        sent = list(messages)
        if self._keywords["append_messages"]:
            stored = await _answer(
                self.adapter.append_messages(resource_id=resource_id, thread_id=thread_id, messages=sent)
            )
        else:
            stored = await _answer(self.adapter.append_messages(thread_id, sent))
        if (
            isinstance(stored, list | tuple)
            and len(stored) == len(sent)
            and all(isinstance(m, Message) for m in stored)
        ):
            return list(stored)
        return sent  # void (or a count, an ack): the turn is stored as sent

    async def get_working_memory(self, *, resource_id: str) -> dict[str, Any] | None:
        if self._keywords["get_working_memory"]:
            data = await _answer(self.adapter.get_working_memory(resource_id=resource_id))
        else:
            data = await _answer(self.adapter.get_working_memory(resource_id))
        return data

    async def update_working_memory(
        self, *, resource_id: str, patch: dict[str, Any], expected_version: int | None = None
    ) -> Any:
        method = self.adapter.update_working_memory
        if not self._keywords["update_working_memory"]:
            if expected_version is not None:
                raise UsageError(
                    f"{type(self.adapter).__name__}.update_working_memory takes no expected_version "
                    "(the AgentMemory signature is update_working_memory(resource_id, patch))"
                )
            return await _answer(method(resource_id, patch))
        if expected_version is None:
            return await _answer(method(resource_id=resource_id, patch=patch))
        return await _answer(method(resource_id=resource_id, patch=patch, expected_version=expected_version))


def _takes_resource_id(method: Callable[..., Any]) -> bool:
    """Whether the method is called with keywords (it names ``resource_id`` or takes ``**kwargs``)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # no readable signature (a builtin): caderno's own spelling
        return True
    return any(p.name == "resource_id" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


async def _answer(result: Any) -> Any:
    """A method's answer: awaited when it can be (an async method), as it is otherwise."""
    return await result if inspect.isawaitable(result) else result
