"""Context management: keep a long agent context small without losing anything.

Three middlewares for ``ReActAgent`` (``middlewares=[...]``), each also usable on its own over
any ``list[Msg]``:

- ``ToolResultEviction``: a result over a size limit has its full text offloaded through an
  ``OffloadFilesystem`` and is replaced by its preview and the recovery path; the model reads it
  back with ``eviction.read_tool`` (``read_offloaded``);
- ``ToolResultPruning``: results older than a protected recent window shrink to previews;
- ``SummaryCompaction``: past a token or message threshold the older part of the context is
  summarized by a model, never splitting a tool call from its result.

All three shorten results with the one ``ToolResultPreview`` (media, fields and order kept) and
mark what they edit (``marks``). The agent saves every edit through its normal incremental save,
so only changed rows are written and the originals stay in the ledger's history.
"""

from agentledger.context.compaction import SummaryCompaction, summary_input
from agentledger.context.eviction import ToolResultEviction
from agentledger.context.offload import (
    LocalFilesystem,
    OffloadFilesystem,
    default_offload_root,
    offload_path,
    parse_offload_path,
)
from agentledger.context.preview import ToolResultPreview
from agentledger.context.pruning import ToolResultPruning
from agentledger.context.tokens import context_tokens, estimate_tokens

__all__ = [
    "LocalFilesystem",
    "OffloadFilesystem",
    "SummaryCompaction",
    "ToolResultEviction",
    "ToolResultPreview",
    "ToolResultPruning",
    "context_tokens",
    "default_offload_root",
    "estimate_tokens",
    "offload_path",
    "parse_offload_path",
    "summary_input",
]
