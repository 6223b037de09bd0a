"""The tool messages ``create_agent``'s model node writes itself.

With a ``ToolStrategy`` response format the model gives its structured answer as a call of a
tool named after the schema. No tool runs: LangChain answers the call in the model node, with
the structured response ("Returning structured response: ...") or with the validation errors
the model is asked to fix. These are no tool's output: the middleware marks them as its host's
answers (no facts are read from them), and an error as a failed call (``status="error"``), which
the model reads whole up to ``cas.error_passthrough_tokens``, as it would any failed call.
"""

from __future__ import annotations

from langchain.agents.middleware import ModelResponse
from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._messages import META_KEY
from ctxplugin.cas import HOST_ANSWER


def answered_by_host(response: ModelResponse) -> ModelResponse:
    """``response`` with the tool messages of the model node marked as its host's answers; the
    same response when it has none. A response without a structured response answers with
    errors (the model node adds tool messages only to answer structured-output calls)."""
    if not any(isinstance(m, ToolMessage) for m in response.result):
        return response
    failed = response.structured_response is None
    result: list[BaseMessage] = [
        _marked(m, failed) if isinstance(m, ToolMessage) else m for m in response.result
    ]
    return ModelResponse(result=result, structured_response=response.structured_response)


def _marked(message: ToolMessage, failed: bool) -> ToolMessage:
    note = message.additional_kwargs.get(META_KEY)
    kwargs = {
        **message.additional_kwargs,
        META_KEY: {**(note if isinstance(note, dict) else {}), HOST_ANSWER: True},
    }
    update: dict[str, object] = {"additional_kwargs": kwargs}
    if failed:
        update["status"] = "error"
    return message.model_copy(update=update)
