"""The model gateway: keys never enter the cage.

Runners get a per-turn token as their API key and a base URL pointing here; the gateway maps
the token to its sandbox, owner and turn, forwards to the connector's real host with the real
credentials, streams the answer back unbuffered, and meters usage.
"""
