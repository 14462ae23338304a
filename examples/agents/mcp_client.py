"""The same agent loop through the MCP server (`vmem mcp`), for agent code in any
framework that speaks MCP: the official Python client, over stdio.

    python examples/agents/mcp_client.py PATH/TO/WORKING/COPY [--vmem PROGRAM]

The server runs in the working copy (its origin remote names the repository; the store
is VMEM_DATABASE_URL, passed on to the server). Tools answer text for the model and
structured content for code: this uses the structured content.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

import mcp
from mcp import StdioServerParameters


def text(result: Any) -> str:
    """The text content of a tool's answer (what a model would read)."""
    return "".join(getattr(block, "text", "") for block in result.content)


class McpMemory:
    """context_for / remember / feedback over the MCP tools."""

    def __init__(self, client: mcp.Client) -> None:
        self.client = client

    async def _call(self, tool: str, **arguments: Any) -> Any:
        result = await self.client.call_tool(tool, arguments)
        if result.is_error:
            raise RuntimeError(f"{tool}: {text(result)}")
        return result

    async def context_for(self, task: str) -> tuple[str, list[str]]:
        """The memories the task is about, verified by the server before it answers:
        the text to put in the prompt, and the ids of those that hold."""
        result = await self._call("memory_search", query=task, hydration="full")
        verified = [m["id"] for m in result.structured_content["verified"]]
        if not verified:  # nothing matched the words: the most recently confirmed
            result = await self._call("memory_get_recent", limit=10)
            verified = [m["id"] for m in result.structured_content["verified"]]
        return text(result), verified

    async def remember(self, subject: str, fact: str, path: str, start: int,
                       end: int) -> str:
        result = await self._call("memory_store", subject=subject, fact=fact, citations=[
            {"path": path, "line_start": start, "line_end": end}], created_by="mcp-agent")
        return str(result.structured_content["id"])

    async def feedback(self, memory_id: str, success: bool, task: str) -> None:
        await self._call("memory_log_applied", memory_id=memory_id, task=task)
        await self._call("memory_feedback", memory_id=memory_id,
                         outcome="success" if success else "failure")


async def run(repo_path: str, vmem: str) -> None:
    server = StdioServerParameters(command=vmem, args=["-C", repo_path, "mcp"],
                                   env=dict(os.environ))
    async with mcp.Client(server) as client:
        memory = McpMemory(client)
        stored = await memory.remember("Timeout", "Requests time out after TIMEOUT seconds.",
                                       "app/net.py", 2, 2)
        print(f"stored {stored}")
        text, ids = await memory.context_for("timeout")
        print(f"{len(ids)} verified")
        print(text)
        for memory_id in ids:
            await memory.feedback(memory_id, True, "shorten the timeout")
        print(f"feedback recorded for {len(ids)} memories")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo_path", help="a git working copy with an origin remote")
    parser.add_argument("--vmem", default="vmem", help="how to start vmem (default: vmem)")
    args = parser.parse_args()
    asyncio.run(run(args.repo_path, args.vmem))


if __name__ == "__main__":
    main()
