"""Model clients: `OpenAICompatible` speaks to any OpenAI-compatible chat endpoint,
`Anthropic` to Anthropic's Messages API; both are a `ChatModel`.

Needs httpx: the ``models`` extra (``pip install 'corral[models]'``) or the
``anthropic`` extra (the same dependency).
"""

try:
    import httpx as _httpx  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "corral.models needs httpx: install the extra with pip install 'corral[models]' "
        "(or 'corral[anthropic]')"
    ) from _exc

from .._chat import TEXT_PARTS, THINKING_BLOCKS, ChatModel, ChatResponse, ThinkingBlock, ToolCall
from ._anthropic import Anthropic
from ._openai import OpenAICompatible

__all__ = [
    "TEXT_PARTS",
    "THINKING_BLOCKS",
    "Anthropic",
    "ChatModel",
    "ChatResponse",
    "OpenAICompatible",
    "ThinkingBlock",
    "ToolCall",
]
