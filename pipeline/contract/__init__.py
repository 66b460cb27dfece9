"""The contract: one article from prompt to SLUG.md, its phases, its files and its record."""
