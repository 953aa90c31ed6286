"""A turn's attachments where no file lands in a box, and the line that tells a runner about them.

Sandbox assistants get the files in `<work dir>/attachments/` (`stages.sandbox.write_attachments`) and the
runner's prompt ends with a line listing their paths (`with_attachment_note`), so the agent knows
they are there (Claude Code reads images with its Read tool). Assistants without a sandbox (LLM
and hook mode) get them in the user's message instead (`with_attachments`): images as image
parts (a model without vision gets a line naming each, `orchestrator.llm.images`), text files
inline, anything else named with its type and size.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from orchestrator.llm.images import IMAGE_TYPES, MAX_IMAGE_BYTES, attachment_parts
from orchestrator.pipeline.contract import Attachment, InputMessage
from runners.base import ImagePart

ATTACHMENTS_DIR = "attachments"


def attachment_note(attachments: Sequence[Attachment], work_dir: str) -> str:
    """The lines naming the attached files in the box ("" without any)."""
    if not attachments:
        return ""
    base = f"{work_dir.rstrip('/')}/{ATTACHMENTS_DIR}"
    lines = [f"- {base}/{a.name} ({a.media_type}, {len(a.content)} bytes)" for a in attachments]
    return "The user attached these files (in the workspace):\n" + "\n".join(lines)


def with_attachment_note(prompt: str, attachments: Sequence[Attachment], work_dir: str) -> str:
    """`prompt` followed by `attachment_note`."""
    note = attachment_note(attachments, work_dir)
    return f"{prompt}\n\n{note}" if note else prompt


def image_parts(attachments: Sequence[Attachment], work_dir: str = "") -> tuple[ImagePart, ...]:
    """The attached images a model can take (type and size), for runners with image input; with
    `work_dir`, each names its path in the box."""
    base = f"{work_dir.rstrip('/')}/{ATTACHMENTS_DIR}"
    return tuple(
        ImagePart(
            name=a.name,
            media_type=a.media_type,
            data=base64.b64encode(a.content).decode(),
            path=f"{base}/{a.name}" if work_dir else "",
        )
        for a in attachments
        if a.media_type in IMAGE_TYPES and len(a.content) <= MAX_IMAGE_BYTES
    )


def with_attachments(
    messages: Sequence[InputMessage], attachments: Sequence[Attachment]
) -> tuple[InputMessage, ...]:
    """`messages` with the attachments added as parts of the last user message."""
    if not attachments:
        return tuple(messages)
    out = list(messages)
    index = next((i for i in range(len(out) - 1, -1, -1) if out[i].role == "user"), None)
    extra = [part for a in attachments for part in attachment_parts(a.name, a.content, a.media_type)]
    if index is None:
        return (*out, InputMessage(role="user", content=extra))
    message = out[index]
    parts = (
        [{"type": "text", "text": message.content}]
        if isinstance(message.content, str)
        else list(message.content)
    )
    out[index] = message.model_copy(update={"content": [*parts, *extra]})
    return tuple(out)
