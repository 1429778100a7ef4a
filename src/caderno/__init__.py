"""caderno: durable memory for AI agents.

Conversation history, working memory, a notebook and recall, in one
database (SQLite embedded, PostgreSQL to scale out).
"""

from __future__ import annotations

from .agent.chat import AgentChat, ChatResult, RecallSettings, ToolCallRecord
from .agent.function_tools import Tool, ToolSpec, tool
from .agent.models import Model, ModelRequest, OpenAIChatModel, ScriptedModel
from .core import errors
from .core.errors import CadernoError, Conflict, InvalidPatch, NotFound, StorageError, Unsupported, UsageError
from .core.messages import Message, Thread, ToolCall, WorkingMemory
from .core.version import __version__
from .memory.adapters.agent_memory import InMemoryAgentMemory
from .memory.adapters.connect import connect
from .memory.adapters.journal import Journal
from .memory.adapters.notebook_files import Notebook
from .memory.adapters.sync import SyncMemory, connect_sync
from .memory.engines.get_context import ContextParts
from .memory.engines.recall import Recalled
from .memory.facade import AgentMemory, Memory
from .stores.base import Store
from .stores.memory import InMemoryStore
from .stores.sqlite import SQLiteStore

__all__ = [
    "AgentChat",
    "AgentMemory",
    "CadernoError",
    "ChatResult",
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
