"""Memories that live in the repository: a folder of markdown files (``layout``, in a
strict YAML front-matter subset: ``frontmatter``), exported from and imported into any
store (``sync``)."""
