"""caderno: durable memory for AI agents.

Conversation history, working memory, a notebook and recall, in one
database (SQLite embedded, PostgreSQL to scale out).
"""

from __future__ import annotations

from . import errors
from .agent.chat import AgentChat, ChatResult, RecallSettings, ToolCallRecord
from .agent.models import Model, ModelRequest, OpenAIChatModel, ScriptedModel
from .agent.tools import Tool, ToolSpec, tool
from .errors import CadernoError, Conflict, InvalidPatch, NotFound, StorageError, Unsupported, UsageError
from .journal import Journal
from .memory import AgentMemory, Memory, connect
from .messages import Message, Thread, ToolCall, WorkingMemory
from .notebook import Notebook
from .recall import Recalled
from .stores.base import Store
from .stores.memory import InMemoryStore
from .stores.sqlite import SQLiteStore
from .tri_hybrid import ContextParts

__version__ = "0.1.0"

__all__ = [
    "AgentChat",
    "AgentMemory",
    "CadernoError",
    "ChatResult",
    "Conflict",
    "ContextParts",
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
    "errors",
    "tool",
]
