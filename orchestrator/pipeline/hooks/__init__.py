"""The assistant's hooks (Create, Next) and what they are given: context, memory, agents, MCP."""
