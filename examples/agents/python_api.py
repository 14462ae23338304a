"""An agent loop over verified memory, through the Python API (VerifiedMemoryProvider).

    python examples/agents/python_api.py PATH/TO/WORKING/COPY [--db URL]

Stores what "the agent" learned (a citation of the first lines of a file it names), asks
for the memories relevant to a task, verified against the code now, and reports that the
memory it used helped. The store is --db, else VMEM_DATABASE_URL, as for vmem.
"""

from __future__ import annotations

import argparse

from verified_memory import VerifiedMemoryProvider


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo_path", help="a git working copy with an origin remote")
    parser.add_argument("--db", help="memory store URL (default: VMEM_DATABASE_URL)")
    parser.add_argument("--cite", default="app/net.py:1-8", help="PATH:START-END to cite")
    args = parser.parse_args()

    with VerifiedMemoryProvider.open(args.repo_path, db=args.db, agent="example-agent") as memory:
        # 1. The agent learned a convention while working: it stores it, with citations.
        learned = memory.remember(
            "Retry budget",
            "HTTP calls retry MAX_RETRIES times, then give up.",
            [args.cite],
            reason="Raising it without a backoff floods the upstream.",
            tags=["http"],
        )
        print(f"stored {learned.id}")

        # 2. A later task: the memories it is about, verified now, ready for the prompt.
        task = "Make fetch give up sooner when the retry budget is spent"
        context = memory.context_for(task)
        print(f"{len(context.memories)} verified, {len(context.left_out)} left out")
        print(context.text)

        # 3. The memory shaped the work and the tests passed: say so.
        for memory_id in context.ids:
            memory.feedback(memory_id, success=True, task=task)
        print(f"feedback recorded for {len(context.ids)} memories")


if __name__ == "__main__":
    main()
