"""Image parts in, image blocks for each API out; text for a model without vision."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from orchestrator.dsl import ConnectorSpec
from orchestrator.dsl.connectors import Capabilities
from orchestrator.llm.anthropic_client import request_body as anthropic_body
from orchestrator.llm.images import attachment_parts, has_vision, image_from_part, without_images
from orchestrator.llm.messages import ChatMessage, ImageBlock, ModelRequest, TextBlock
from orchestrator.llm.openai_client import request_body as openai_body

MESSAGE = ChatMessage(
    role="user",
    content=(TextBlock(text="look"), ImageBlock(media_type="image/png", data="aGk=", name="a.png")),
)


@pytest.mark.parametrize(
    ("part", "block"),
    [
        (
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,aGk="}},
            ImageBlock(media_type="image/jpeg", data="aGk="),
        ),
        (
            {"type": "image_url", "image_url": "https://example.com/a.png"},
            ImageBlock(url="https://example.com/a.png"),
        ),
        (
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/gif", "data": "aGk="},
                "name": "g.gif",
            },
            ImageBlock(media_type="image/gif", data="aGk=", name="g.gif"),
        ),
        (
            {"type": "image", "source": {"type": "url", "url": "https://example.com/b.png"}},
            ImageBlock(url="https://example.com/b.png"),
        ),
        ({"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}, None),
        ({"type": "text", "text": "hi"}, None),
    ],
)
def test_parts_become_image_blocks(part: dict[str, object], block: ImageBlock | None) -> None:
    assert image_from_part(part) == block


def test_each_api_gets_its_image_shape() -> None:
    request = ModelRequest(system="", messages=(MESSAGE,), max_tokens=10)
    assert anthropic_body(request, "m")["messages"][0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGk="}},
    ]
    assert openai_body(request, "m")["messages"][-1]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
    ]


def test_without_vision_an_image_is_a_line_of_text() -> None:
    [message] = without_images([MESSAGE])
    assert message.text == "look[image a.png (image/png, 2 bytes): not shown, this model has no image input]"
    spec = ConnectorSpec(id="c", label="c", type="openai", model="m", base_url="http://x", key=SecretStr(""))
    assert not has_vision(spec)
    assert has_vision(spec.model_copy(update={"capabilities": Capabilities(vision=True)}))
    assert has_vision(spec.model_copy(update={"capabilities": Capabilities(multimodal=True)}))


def test_attachment_parts() -> None:
    [image] = attachment_parts("a.png", b"hi", "image/png")
    assert image == {
        "type": "image",
        "name": "a.png",
        "source": {"type": "base64", "media_type": "image/png", "data": "aGk="},
    }
    [text] = attachment_parts("n.md", "héllo".encode(), "text/markdown")
    assert text["text"] == "Attached file n.md (text/markdown):\nhéllo"
    [binary] = attachment_parts("x.bin", b"\xff\x00", "application/octet-stream")
    assert (
        binary["text"]
        == "[attached file x.bin (application/octet-stream, 2 bytes): not readable as text or image]"
    )
    [big] = attachment_parts("big.png", b"x" * (5 * 2**20 + 1), "image/png")
    assert "too large to show" in str(big["text"])
