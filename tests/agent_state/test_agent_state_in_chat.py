"""Macros and approvals inside AgentChat, with scripted sessions."""

from __future__ import annotations

import json
from typing import Any

import caderno
from caderno import AgentChat, Message, ScriptedModel, ToolCall, tool
from caderno.agent.approval import Approval, ApprovalRequest

RAN: list[str] = []
BROKEN: set[str] = set()


@tool
def list_files(command: str) -> str:
    """List files (a stand-in for a shell tool)."""
    RAN.append(command)
    return "a.txt b.txt"


@tool
def read_file(path: str) -> str:
    """Read a file."""
    if path in BROKEN:
        raise FileNotFoundError(path)
    return "contents of " + path


def pair(i: int, path: str = "a.txt") -> list[Message]:
    return [
        Message.assistant(tool_calls=[ToolCall(id=f"l{i}", name="list_files", arguments={"command": "ls -la"})]),
        Message.assistant(tool_calls=[ToolCall(id=f"r{i}", name="read_file", arguments={"path": path})]),
        Message.assistant("ok"),
    ]


async def test_a_macro_is_learned_suggested_and_unlearned(memory: caderno.Memory) -> None:
    BROKEN.clear()
    steps = pair(1) + pair(2) + pair(3) + pair(4) + pair(5)
    steps += [Message.assistant(tool_calls=[ToolCall(id="l6", name="list_files", arguments={"command": "ls"})])]
    steps += [Message.assistant("done")]
    model = ScriptedModel(steps)
    chat = AgentChat(model=model, memory=memory, tools=[list_files, read_file], macros=True)
    for i in range(1, 7):
        if i == 4:
            BROKEN.add("a.txt")  # from now on the learned follow-up fails
        await chat.ask(messages=f"turn {i}", resource_id="r", thread_id="t")

    def tool_results(request: int) -> list[str]:
        return [m.content for m in model.requests[request].messages if m.role == "tool"]

    # Turns 1-2 teach (0.5 -> 0.6 -> 0.7); turn 3 sees the hint after list_files.
    assert not any("Hint:" in c for c in tool_results(4))  # turn 2, after list_files
    turn3_after_list = tool_results(7)[-1]
    assert "Hint: after list_files like this, read_file usually follows" in turn3_after_list
    assert '{"path":"a.txt"}' in turn3_after_list
    (macro,) = await memory.macros.list(resource_id="r")
    assert macro.used_count >= 1  # turn 3 followed the suggestion
    # Turns 4-5: the follow-up fails twice (0.8 -> 0.6 -> 0.4): below the threshold, no longer shown.
    assert (macro.success_count, macro.failure_count, macro.confidence) == (3, 2, 0.4)
    assert "Hint:" in tool_results(10)[-1] and "Hint:" not in tool_results(13)[-1]
    assert "Hint:" not in tool_results(len(model.requests) - 1)[-1]  # turn 6: list_files, no suggestion
    assert await memory.macros.suggest_next(resource_id="r", tool="list_files", args={"command": "ls"}) == []


def approval_model(*commands: str) -> ScriptedModel:
    steps: list[Message] = []
    for i, command in enumerate(commands):
        call = ToolCall(id=f"c{i}", name="run_command", arguments={"command": command})
        steps += [Message.assistant(tool_calls=[call]), Message.assistant("ok")]
    return ScriptedModel(steps)


@tool(needs_approval=True)
def run_command(command: str) -> str:
    """Run a shell command (needs the user's approval)."""
    RAN.append(command)
    return "ran " + command


async def test_tools_that_need_approval(memory: caderno.Memory) -> None:
    RAN.clear()
    asked: list[ApprovalRequest] = []
    answers = iter(["no", "yes", "always", Approval(decision="always", prefix="git status")])

    def approve(request: ApprovalRequest) -> Any:
        asked.append(request)
        return next(answers)

    commands = ["rm -rf /", "ls", "ls -la", "ls -R", "lsblk", "ls; rm -rf /", "git status -s", "git status"]
    model = approval_model(*commands)
    chat = AgentChat(model=model, memory=memory, tools=[run_command], approve=approve)
    results = []
    for command in commands:
        if command == "lsblk":
            answers = iter(["no"])
        if command == "ls; rm -rf /":
            answers = iter(["no"])
        if command == "git status -s":
            answers = iter([Approval(decision="always", prefix="git status")])
        result = await chat.ask(messages=f"run {command}", resource_id="r", thread_id="t")
        results.append(result.tool_calls[0])
    assert results[0].error and "did not approve" in results[0].error  # no
    assert results[1].result == "ran ls"  # yes, once
    assert results[2].result == "ran ls -la"  # always: "ls" is approved from now on
    assert results[3].result == "ran ls -R"  # not asked: the prefix covers it
    assert results[4].error  # lsblk is not "ls": asked, refused
    assert results[5].error  # shell operators: never covered by a prefix, asked, refused
    assert results[7].result == "ran git status"  # approved as "git status" on the previous turn
    assert [r.command for r in asked] == ["rm -rf /", "ls", "ls -la", "lsblk", "ls; rm -rf /", "git status -s"]
    assert await memory.prefixes.list(resource_id="r") == ["git status", "ls"]
    assert RAN == ["ls", "ls -la", "ls -R", "git status -s", "git status"]


async def test_trusted_runs_skip_the_question_and_no_callback_refuses(memory: caderno.Memory) -> None:
    RAN.clear()
    chat = AgentChat(model=approval_model("make deploy", "make deploy"), memory=memory, tools=[run_command])
    refused = await chat.ask(messages="deploy", resource_id="r", thread_id="t")
    assert "needs the user's approval" in (refused.tool_calls[0].error or "")
    trusted = await chat.ask(messages="deploy", resource_id="r", thread_id="t", trusted=True)
    assert trusted.tool_calls[0].result == "ran make deploy" and RAN == ["make deploy"]
    stored = await memory.get_messages(resource_id="r", thread_id="t")
    assert json.loads(json.dumps([m.to_dict() for m in stored]))  # both turns stored whole
