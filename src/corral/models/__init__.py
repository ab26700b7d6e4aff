"""Model clients: `OpenAICompatible` speaks to any OpenAI-compatible chat endpoint.

Needs the ``models`` extra (``pip install 'corral[models]'``, which installs httpx).
"""

try:
    import httpx as _httpx  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "corral.models needs httpx: install the extra with pip install 'corral[models]'"
    ) from _exc

from .._chat import ChatModel, ChatResponse, ToolCall
from ._openai import OpenAICompatible

__all__ = ["ChatModel", "ChatResponse", "OpenAICompatible", "ToolCall"]
