"""Golden transcripts of Claude Code (R18): real stdout in, reviewed protocol events out."""
