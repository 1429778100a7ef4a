"""The tools layer: the catalog of memory tools a model calls, each defined once.

A tool here is a name, a description, the JSON Schema of its arguments, one
validator with caderno's own error sentences, one handler over the memory's
port and one result shape (``caderno.tools.base``). AgentChat, the MCP
server, the OpenAI Agents SDK adapter and the memory proxy only bind them
(``caderno.tools.catalog`` says which interface offers which tool, and why).
"""
