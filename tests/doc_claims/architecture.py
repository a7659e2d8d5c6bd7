"""docs/architecture.md: it states no numbers (tests/test_docs_numbers.py keeps it so)."""

CLAIMS: list = []
