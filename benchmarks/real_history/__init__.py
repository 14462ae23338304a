"""Real-history relocation benchmark: citations made at old commits of public
repositories, checked at newer ones, labelled by oracles that share no code with the
verifier (Python's ``ast``, Go's ``go/ast``, the TypeScript compiler, javac's tree API).
See README.md beside this file; run ``python -m benchmarks.real_history.run --mirrors DIR``.
"""
