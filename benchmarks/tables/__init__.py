"""The Markdown the report writes from a results file: tables, claims, the docs' named blocks."""
