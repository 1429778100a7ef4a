"""``store: false`` on every model call caderno makes (the owned-conversation rule).

caderno keeps the conversation, so each request asks the provider to keep no
copy. A scripted chat-completions upstream on a loopback port (``_upstream``)
records the request bodies it receives; the callers are real: caderno's
``OpenAIChatModel``, the memory proxy behind the official ``openai`` client,
and the Agents SDK's ``Runner`` with its own chat-completions model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from _upstream import Upstream, serving, text  # noqa: E402

import caderno  # noqa: E402
from caderno import AgentChat, Message  # noqa: E402
from caderno.agent.models import OpenAIChatModel  # noqa: E402
from caderno.server import create_app  # noqa: E402
from caderno.server.proxy import THREAD_HEADER, install_proxy  # noqa: E402


async def test_chat_model_asks_the_upstream_not_to_store(tmp_path: Path) -> None:
    upstream = Upstream(script=[text("Oi!"), text("De novo.")])
    async with serving(upstream.app()) as up, caderno.connect(f"sqlite:///{tmp_path / 'm.db'}", embedder=None) as mem:
        model = OpenAIChatModel(model="scripted-1", base_url=f"{up}/v1")
        try:
            await model.complete([Message.user("olá")], [])
            await AgentChat(model=model, memory=mem).ask(messages="olá", resource_id="casa", thread_id="t")
        finally:
            await model.aclose()
    assert [r["store"] for r in upstream.requests] == [False, False]


async def test_proxy_upstream_call_is_not_stored_whatever_the_client_asks(tmp_path: Path) -> None:
    upstream = Upstream(script=[text("Anotado.")])
    memory = await caderno.connect(f"sqlite:///{tmp_path / 'proxy.db'}", embedder=None)
    token, _ = await memory.keys.create(resources=["alice"], name="app")
    async with serving(upstream.app()) as up:
        model = OpenAIChatModel(model="scripted-1", base_url=f"{up}/v1")
        app = create_app(memory, model=model, background=False, routers=[install_proxy])
        try:
            async with serving(app) as base:
                client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=token, max_retries=0)
                answer = await client.chat.completions.create(
                    model="any",
                    store=True,  # the client's wish is ignored like its other settings: caderno owns the turn
                    messages=[{"role": "user", "content": "lembra disso"}],
                    extra_headers={THREAD_HEADER: "t1"},
                )
                await client.close()
        finally:
            await model.aclose()
    assert answer.choices[0].message.content == "Anotado."
    assert len(upstream.requests) == 1 and upstream.requests[0]["store"] is False


async def test_agents_sdk_model_settings_send_store_false(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner

    from caderno.integrations.openai_agents import CadernoSession, model_settings

    assert model_settings(temperature=0.2).temperature == 0.2
    upstream = Upstream(script=[text("Feito.")])
    async with serving(upstream.app()) as up, caderno.connect(f"sqlite:///{tmp_path / 'sdk.db'}", embedder=None) as mem:
        client = openai.AsyncOpenAI(base_url=f"{up}/v1", api_key="upstream-key", max_retries=0)
        agent = Agent(
            name="household",
            model=OpenAIChatCompletionsModel(model="scripted-1", openai_client=client),
            model_settings=model_settings(),
        )
        session = CadernoSession("t1", memory=mem, resource_id="casa")
        result = await Runner.run(agent, "olá", session=session, run_config=RunConfig(tracing_disabled=True))
        await client.close()
    assert result.final_output == "Feito."
    assert len(upstream.requests) == 1 and upstream.requests[0]["store"] is False
