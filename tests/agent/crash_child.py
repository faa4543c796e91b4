"""A scripted agent run for the crash tests (``python -m tests.agent.crash_child``).

``run URL``: runs turns forever on session "crash", printing ``committed <id>`` after each
message is durably stored (flushed), so the parent knows what was complete before it killed us.
``tool-crash URL COUNTER IDEMPOTENT``: one run whose tool records a side effect in COUNTER and
then kills the process before its result can be saved.
"""

from __future__ import annotations

import asyncio
import os
import sys

from agentledger.agent.context import MessageCommitted
from agentledger.agent.react import ReActAgent
from agentledger.agent.tools import Tool
from agentledger.messages import Msg, TextBlock, ThinkingBlock, ToolUseBlock
from agentledger.testing.scripted import ScriptedModel


async def slow_echo(text: str) -> str:
    """Echo after a short pause (widens the window where a kill lands mid-tool)."""
    await asyncio.sleep(0.003)
    return text * 20


def turn_script(n: int) -> list[Msg]:
    return [
        Msg.assistant(
            [
                ThinkingBlock(thinking=f"turn {n}: use tools"),
                ToolUseBlock(id=f"a{n}-{os.getpid()}", name="slow_echo", input={"text": f"x{n}"}),
                ToolUseBlock(id=f"b{n}-{os.getpid()}", name="slow_echo", input={"text": f"y{n}"}),
            ]
        ),
        Msg.assistant([TextBlock(text=f"done {n} " + "z" * 200)]),
    ]


async def run_forever(url: str) -> None:
    n = 0
    while True:
        agent = ReActAgent(ScriptedModel(turn_script(n)), [Tool(slow_echo)], store=url)
        async for event in agent.stream(f"question {n}", "crash"):
            if isinstance(event, MessageCommitted):
                print(f"committed {event.message.id}", flush=True)
        await agent.ledger.close()
        n += 1


async def tool_crash(url: str, counter: str, idempotent: bool) -> None:
    def side_effect(order: str) -> str:
        """Place an order (a side effect), then the process dies before the result is saved."""
        with open(counter, "a") as fh:
            fh.write(order + "\n")
        os._exit(9)

    model = ScriptedModel(
        [
            Msg.assistant(ToolUseBlock(id="c1", name="side_effect", input={"order": "book"})),
        ]
    )
    agent = ReActAgent(model, [Tool(side_effect, idempotent=idempotent)], store=url)
    await agent.run("book it", "s")


if __name__ == "__main__":
    command, url, *rest = sys.argv[1:]
    if command == "run":
        asyncio.run(run_forever(url))
    elif command == "tool-crash":
        asyncio.run(tool_crash(url, rest[0], rest[1] == "1"))
    else:
        raise SystemExit(f"unknown command {command!r}")
