"""caderno: durable memory for AI agents.

Conversation history, working memory, a notebook and recall, in one
database (SQLite embedded, PostgreSQL to scale out).
"""

from __future__ import annotations

from . import errors
from .errors import CadernoError, Conflict, InvalidPatch, NotFound, StorageError, UsageError
from .memory import Memory, connect
from .messages import Message, Thread, ToolCall, WorkingMemory
from .stores.base import Store
from .stores.memory import InMemoryStore
from .stores.sqlite import SQLiteStore

__version__ = "0.1.0"

__all__ = [
    "CadernoError",
    "Conflict",
    "InMemoryStore",
    "InvalidPatch",
    "Memory",
    "Message",
    "NotFound",
    "SQLiteStore",
    "StorageError",
    "Store",
    "Thread",
    "ToolCall",
    "UsageError",
    "WorkingMemory",
    "__version__",
    "connect",
    "errors",
]
