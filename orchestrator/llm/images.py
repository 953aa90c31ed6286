"""Images and other files in a user's message, as the model should get them.

A message's parts (OpenAI `image_url` with a data or http(s) URL, Anthropic `image` with a base64
or URL source) and a turn's attachments become `ImageBlock`s; a text file attached becomes text.
Whether the model sees the images is the connector's `capabilities.vision` (or `multimodal`):
without it every image is replaced by a line of text that names it (`without_images`), so a
model never gets an image part it would refuse, and never silently loses that there was one.
Nothing here fetches a URL: the provider does, for a model with vision.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.dsl import ConnectorSpec
from orchestrator.llm.messages import ChatMessage, ImageBlock, TextBlock

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""What both APIs accept as image input."""
MAX_IMAGE_BYTES = 5 * 2**20
"""Anthropic's per-image limit; a larger image is described as text instead."""
MAX_TEXT_CHARS = 100_000
"""An attached text file is inlined up to this many characters."""
TEXT_TYPES = frozenset({"application/json", "application/x-yaml", "application/xml", "application/toml"})
"""Attachments read as text besides `text/*`."""
_DATA_URL = re.compile(r"^data:(?P<type>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)


def has_vision(connector: ConnectorSpec) -> bool:
    """The connector declares image input (`capabilities.vision`, or `multimodal`)."""
    caps = connector.capabilities
    return caps is not None and (bool(caps.vision) or caps.multimodal)


def image_url(block: ImageBlock) -> str:
    """The block as an OpenAI `image_url.url`: its URL, or a data URL."""
    return block.url or f"data:{block.media_type};base64,{block.data}"


def image_from_part(part: Mapping[str, Any]) -> ImageBlock | None:
    """An OpenAI `image_url` or Anthropic `image` part as an `ImageBlock`; None for other parts."""
    kind = part.get("type")
    if kind == "image_url":
        ref = part.get("image_url")
        url = ref.get("url") if isinstance(ref, Mapping) else ref
        if not isinstance(url, str):
            return None
        match = _DATA_URL.match(url)
        if match:
            return ImageBlock(media_type=match["type"], data=match["data"])
        if url.startswith(("http://", "https://")):
            return ImageBlock(url=url)
        return None
    if kind == "image":
        source = part.get("source")
        if not isinstance(source, Mapping):
            return None
        if source.get("type") == "url" and isinstance(source.get("url"), str):
            return ImageBlock(url=source["url"])
        data, media = source.get("data"), source.get("media_type")
        if isinstance(data, str) and isinstance(media, str):
            name = part.get("name")
            return ImageBlock(media_type=media, data=data, name=name if isinstance(name, str) else "")
    return None


def describe(block: ImageBlock) -> str:
    """The text a model without vision gets instead of the image."""
    what = block.name or block.url or block.media_type
    size = f", {len(block.data) * 3 // 4 - block.data[-2:].count('=')} bytes" if block.data else ""
    return f"[image {what} ({block.media_type}{size}): not shown, this model has no image input]"


def attachment_parts(name: str, content: bytes, media_type: str) -> list[dict[str, Any]]:
    """One attached file as message parts: an image, its text, or a line naming a file the model
    cannot read (never dropped without a word)."""
    size = len(content)
    if media_type in IMAGE_TYPES and size <= MAX_IMAGE_BYTES:
        data = base64.b64encode(content).decode()
        return [
            {
                "type": "image",
                "name": name,
                "source": {"type": "base64", "media_type": media_type, "data": data},
            }
        ]
    if media_type.startswith("text/") or media_type in TEXT_TYPES:
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            cut = "" if len(text) <= MAX_TEXT_CHARS else f"\n[... cut at {MAX_TEXT_CHARS} characters]"
            return [
                {
                    "type": "text",
                    "text": f"Attached file {name} ({media_type}):\n{text[:MAX_TEXT_CHARS]}{cut}",
                }
            ]
    why = "too large to show" if media_type in IMAGE_TYPES else "not readable as text or image"
    return [{"type": "text", "text": f"[attached file {name} ({media_type}, {size} bytes): {why}]"}]


def without_images(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """`messages` with every image replaced by the text `describe` gives."""
    out = []
    for message in messages:
        if not any(isinstance(b, ImageBlock) for b in message.content):
            out.append(message)
            continue
        blocks = tuple(
            TextBlock(text=describe(b)) if isinstance(b, ImageBlock) else b for b in message.content
        )
        out.append(message.model_copy(update={"content": blocks}))
    return out
