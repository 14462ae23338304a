"""``python -m verified_memory`` is ``vmem``."""

from verified_memory.cli import main

main()
