"""Relocation benchmark: does the verifier follow code that moved and catch code that changed?

Real source files in six languages (found on this machine, or fetched from a package
registry into a cache outside the repository at run time) are committed to fresh git
repositories, edited the way real refactors edit code (lines inserted above, a function
moved within its file or to another file, the file renamed, reformatted, re-wrapped, one
body line edited, the function deleted), and cited before the edit. Every cited line is
tracked through the edit, so each citation has a known answer; the verifier
(``verify.bulk.check_citations``) and a plain ``git diff`` hunk-mapping baseline are scored
against it. See README.md beside this file; run ``python -m benchmarks.relocation.run``.
"""
