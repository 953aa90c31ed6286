"""Wire encoders of the stream protocol: native SSE, JSONL, websocket frames, OpenAI chunks."""

from orchestrator.stream.encoders.encoder import EventEncoder, encode_all
from orchestrator.stream.encoders.jsonl import JSONLEncoder, parse_jsonl
from orchestrator.stream.encoders.openai_chunks import OpenAIChunkEncoder, usage_to_openai
from orchestrator.stream.encoders.openai_completion import CompletionWithError, aggregate_completion
from orchestrator.stream.encoders.sse import SSEEncoder
from orchestrator.stream.encoders.websocket import WebSocketEncoder

__all__ = [
    "CompletionWithError",
    "EventEncoder",
    "JSONLEncoder",
    "OpenAIChunkEncoder",
    "SSEEncoder",
    "WebSocketEncoder",
    "aggregate_completion",
    "encode_all",
    "parse_jsonl",
    "usage_to_openai",
]
