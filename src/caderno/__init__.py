"""caderno: durable memory for AI agents.

Conversation history, working memory, a notebook and recall, in one
database (SQLite embedded, PostgreSQL to scale out).
"""

from __future__ import annotations

import importlib
import typing

from .core import errors
from .core.errors import CadernoError, Conflict, InvalidPatch, NotFound, StorageError, Unsupported, UsageError
from .core.version import __version__

if typing.TYPE_CHECKING:
    from .agent.chat import AgentChat, ChatResult, ChatSettings, RecallSettings, ToolCallRecord
    from .agent.function_tools import Tool, ToolSpec, tool
    from .agent.models import Model, ModelRequest, OpenAIChatModel, ScriptedModel
    from .core.messages import Message, Thread, ToolCall, WorkingMemory
    from .memory.adapters.agent_memory import InMemoryAgentMemory
    from .memory.adapters.connect import connect
    from .memory.adapters.journal import Journal
    from .memory.adapters.notebook_files import Notebook
    from .memory.adapters.sync import SyncMemory, connect_sync
    from .memory.engines.get_context import ContextParts
    from .memory.engines.recall import Recalled, RecallQuery
    from .memory.facade import AgentMemory, Memory
    from .stores.base import Store
    from .stores.memory import InMemoryStore
    from .stores.sqlite import SQLiteStore

# The names load with the module that defines them, on first use (``caderno.Memory``, ``from caderno
# import AgentChat``: ``__getattr__`` below), so ``import caderno`` and each start of the ``caderno``
# command stay fast (tests/cli/test_startup.py); the errors load at once. Each lazy name and its module
# (the imports above, for type checkers and the API reference, say the same):
_LAZY = {
    "AgentChat": ".agent.chat",
    "ChatResult": ".agent.chat",
    "ChatSettings": ".agent.chat",
    "RecallSettings": ".agent.chat",
    "ToolCallRecord": ".agent.chat",
    "Tool": ".agent.function_tools",
    "ToolSpec": ".agent.function_tools",
    "tool": ".agent.function_tools",
    "Model": ".agent.models",
    "ModelRequest": ".agent.models",
    "OpenAIChatModel": ".agent.models",
    "ScriptedModel": ".agent.models",
    "Message": ".core.messages",
    "Thread": ".core.messages",
    "ToolCall": ".core.messages",
    "WorkingMemory": ".core.messages",
    "InMemoryAgentMemory": ".memory.adapters.agent_memory",
    "connect": ".memory.adapters.connect",
    "Journal": ".memory.adapters.journal",
    "Notebook": ".memory.adapters.notebook_files",
    "SyncMemory": ".memory.adapters.sync",
    "connect_sync": ".memory.adapters.sync",
    "ContextParts": ".memory.engines.get_context",
    "RecallQuery": ".memory.engines.recall",
    "Recalled": ".memory.engines.recall",
    "AgentMemory": ".memory.facade",
    "Memory": ".memory.facade",
    "Store": ".stores.base",
    "InMemoryStore": ".stores.memory",
    "SQLiteStore": ".stores.sqlite",
}

__all__ = [
    "AgentChat",
    "AgentMemory",
    "CadernoError",
    "ChatResult",
    "ChatSettings",
    "Conflict",
    "ContextParts",
    "InMemoryAgentMemory",
    "InMemoryStore",
    "InvalidPatch",
    "Journal",
    "Memory",
    "Message",
    "Model",
    "ModelRequest",
    "NotFound",
    "Notebook",
    "OpenAIChatModel",
    "RecallQuery",
    "RecallSettings",
    "Recalled",
    "SQLiteStore",
    "ScriptedModel",
    "StorageError",
    "Store",
    "SyncMemory",
    "Thread",
    "Tool",
    "ToolCall",
    "ToolCallRecord",
    "ToolSpec",
    "Unsupported",
    "UsageError",
    "WorkingMemory",
    "__version__",
    "connect",
    "connect_sync",
    "errors",
    "tool",
]


def __getattr__(name: str) -> typing.Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value  # once: later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
