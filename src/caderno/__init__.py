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
from .memory.agent_memory import InMemoryAgentMemory
from .memory.connect import connect
from .memory.facade import AgentMemory, Memory
from .memory.journal import Journal
from .memory.notebook import Notebook
from .memory.recall import Recalled
from .memory.sync import SyncMemory, connect_sync
from .memory.tri_hybrid import ContextParts
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
