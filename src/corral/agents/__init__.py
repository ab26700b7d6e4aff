"""Ready agents: `ToolAgent` drives a chat model through an environment's tools."""

from ._conversation import call_id, conversation, user_message
from ._tool_agent import ToolAgent

__all__ = ["ToolAgent", "call_id", "conversation", "user_message"]
