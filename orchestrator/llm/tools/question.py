"""The `question` tool: the agent asks its user something mid-turn and gets the answer back.

The question goes to the loop's gate (`PermissionGate.ask`): in a session the client gets a
`question` event and answers with a `question_response` frame (or the HTTP route); the answer
text is the tool's result. No answer by the policy's timeout, or no one to ask (CI mode): the
result says so, and the agent goes on with its own judgement.
"""

from __future__ import annotations

from pydantic import Field

from orchestrator.llm.tools.base import ArgsModel, ToolContext, ToolResult, TypedTool
from orchestrator.permissions import Question

NO_ANSWER = "(no answer: the user did not reply; decide yourself and say what you assumed)"
NO_ONE = "(no one to ask in this run; decide yourself and say what you assumed)"


class QuestionArgs(ArgsModel):
    question: str = Field(min_length=1, max_length=4000)
    """The question, in a sentence or two."""
    options: list[str] = Field(default_factory=list, max_length=10)
    """Suggested answers, when there is a choice to make."""


class QuestionTool(TypedTool[QuestionArgs]):
    name = "question"
    description = (
        "Ask the user a question and wait for the answer, when you cannot go on without a decision "
        "only they can make. Offer `options` when there is a choice."
    )
    read_only = True
    args_model = QuestionArgs

    async def call(self, args: QuestionArgs, ctx: ToolContext) -> ToolResult:
        if ctx.gate is None:
            return ToolResult(output=NO_ONE, metadata={"answered": False})
        answer = await ctx.gate.ask(
            Question(text=args.question, options=tuple(args.options), call_id=ctx.tool_call_id)
        )
        return ToolResult(output=answer or NO_ANSWER, metadata={"answered": bool(answer)})
