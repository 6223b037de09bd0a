"""ctxplugin as the chat history of a ``RunnableWithMessageHistory`` chain: the history keeps
the whole conversation (in SQLite beside an embedded engine's other stores) and hands the
chain the prepared view. (langchain-core 1.x deprecates ``RunnableWithMessageHistory`` in
favour of LangGraph persistence; existing chains keep working.)

    uv run --all-packages python examples/message_history.py
"""

from __future__ import annotations

import tempfile
import warnings
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from ctxplugin import ContextEngine
from ctxplugin.testing import ScriptedChatModel

LOG = "\n".join(f"10:{i // 60:02d}:{i % 60:02d} INFO checkout request id=req-{i:05d} ok" for i in range(150))
QUESTIONS = [
    "My booking is 4WQ150 and checkout failed.",
    f"Here is the log:\n{LOG}\n10:02:31 ERROR checkout TimeoutError: payments-api",
    "Can you retry the payment?",
    "Use the card ending 4421.",
    "Thanks. Which booking was this about?",
]


def echo(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
    sent = sum(len(m.text) for m in messages)
    return AIMessage(content=f"(I was sent {len(messages)} messages, {sent:,} chars) Noted.")


def main() -> None:
    warnings.filterwarnings("ignore", message="RunnableWithMessageHistory is deprecated")
    model = ScriptedChatModel(script=[echo] * len(QUESTIONS))
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are an airline assistant."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    with tempfile.TemporaryDirectory() as tmp:
        engine = ContextEngine.embedded(path=tmp)
        chain = RunnableWithMessageHistory(prompt | model, engine.history,  # <- the history factory
                                           input_messages_key="question", history_messages_key="history")
        for question in QUESTIONS:
            reply = chain.invoke({"question": question}, {"configurable": {"session_id": "mia"}})
            print(f"> {question.splitlines()[0][:60]}\n  {reply.content}")

        # a new engine on the same path (a restarted process) still has the whole conversation
        history = ContextEngine.embedded(path=tmp).history("mia")
        stored = sum(len(m.text) for m in history.full_messages)
        view = history.messages
        print(f"stored: {len(history.full_messages)} messages, {stored:,} chars; "
              f"the next call gets {len(view)} messages, {sum(len(m.text) for m in view):,} chars")
        print("the booking number is still in view:", any("4WQ150" in m.text for m in view))


if __name__ == "__main__":
    main()
