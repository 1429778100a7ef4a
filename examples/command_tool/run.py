"""A shell tool that asks before it runs: python examples/command_tool/run.py [DB].

Not offered by default anywhere: running commands is a choice an
application makes. The tool is marked ``needs_approval``; the approval
callback here asks on the terminal (yes / no / always). "always" stores the
command's first word as an approved prefix for the resource, so the next
``ls …`` runs without asking — but never ``lsblk``, and never a command with
``;``, ``&&``, ``|``, redirections or substitutions.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import caderno
from caderno import AgentChat, Message, ScriptedModel, ToolCall
from caderno.agent.approval import ApprovalRequest


@caderno.tool(needs_approval=True)
def run_command(command: str) -> str:
    """Run a shell command and return what it printed.

    Args:
        command: the command line, e.g. "ls -la".
    """
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=30)
    return (done.stdout + done.stderr)[-4000:] or f"(exit status {done.returncode})"


def ask_on_terminal(request: ApprovalRequest) -> str:
    answer = input(f"The agent wants to run {request.command!r}. Allow? [y]es / [n]o / [a]lways: ").strip().lower()
    return {"y": "yes", "yes": "yes", "a": "always", "always": "always"}.get(answer, "no")


async def main(db: str) -> None:
    model = ScriptedModel(  # stands in for a real model: it asks to list the directory twice
        [
            Message.assistant(tool_calls=[ToolCall(id="c1", name="run_command", arguments={"command": "ls"})]),
            Message.assistant("Listed."),
            Message.assistant(tool_calls=[ToolCall(id="c2", name="run_command", arguments={"command": "ls -la"})]),
            Message.assistant("Listed again."),
        ]
    )
    async with caderno.connect(db) as memory:
        chat = AgentChat(model=model, memory=memory, tools=[run_command], approve=ask_on_terminal)
        for question in ("what is here?", "and in detail?"):
            result = await chat.ask(messages=question, resource_id="me", thread_id="shell")
            call = result.tool_calls[0]
            print(call.error or call.result)
        print("approved prefixes:", await memory.prefixes.list(resource_id="me"))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "shell-example.db"))
