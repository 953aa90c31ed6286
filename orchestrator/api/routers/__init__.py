"""One thin router per resource (STYLE R11)."""
