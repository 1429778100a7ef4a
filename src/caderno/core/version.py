"""The package version (one name, read by the MCP server and the HTTP API)."""

__version__ = "0.1.0"
