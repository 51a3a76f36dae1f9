"""Saved key/value states of a llama.cpp model's earlier calls, so that a call whose
prompt starts like any recent call's computes only what is new.

Why: llama-cpp-python reuses its cache only for the prefix a prompt shares with the
*previous* call. Within one answer the calls alternate between two contexts: the
generator's (every passage) and the verifier's (the cited passages only). The
verifier's own answer reads the generator's context again, but the verifier's reading
of the cited passages comes in between and overwrites it, so the model read the same
passages twice (bench/bench_calls.py: about 400 tokens, 5 s on two cores, per answer).

Only the sequence's key/value cells and its tokens are kept
(``llama_state_seq_get_data``: about 28 kB a token for the 1.5B model, 15 MB for a
whole answer's context), not the logits ``Llama.save_state`` copies (about 0.3 GB at
this vocabulary): a restored prefix is always followed by at least one token computed
afresh (``Llama.generate`` evaluates the last token again when it holds the whole
prompt), so no logits are ever read from a restored state.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# States kept per model: an answer has two contexts (generator, verifier); the third is
# the previous answer's, whose instructions the next one starts with.
KEEP = 3
# A restore copies the state in (a few ms for 500 tokens); fewer tokens than this are
# computed again faster than they are restored.
MIN_GAIN = 32


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass(frozen=True)
class SavedState:
    """The tokens a model had evaluated and their key/value cells (sequence 0)."""

    tokens: tuple[int, ...]
    cells: bytes


def read_cells(llama: Any) -> bytes:
    """The key/value cells of ``llama``'s sequence 0 (empty: none could be read)."""
    from llama_cpp import llama_cpp

    ctx = llama._ctx.ctx
    size = llama_cpp.llama_state_seq_get_size(ctx, 0)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
    return bytes(buffer)[:written]


def write_cells(llama: Any, cells: bytes) -> bool:
    """Replace ``llama``'s key/value cells with ``cells``; whether llama.cpp took them."""
    from llama_cpp import llama_cpp

    llama._ctx.kv_cache_seq_rm(-1, 0, -1)
    buffer = (ctypes.c_uint8 * len(cells)).from_buffer_copy(cells)
    return bool(llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, buffer, len(cells), 0))


class KVStates:
    """The ``keep`` most recent states of one ``Llama``; every method is called with the
    model's lock held (tools/models/local_llm.py). ``read`` and ``write`` move the cells
    (unit tests pass their own)."""

    def __init__(
        self,
        keep: int = KEEP,
        min_gain: int = MIN_GAIN,
        read: Callable[[Any], bytes] = read_cells,
        write: Callable[[Any, bytes], bool] = write_cells,
    ) -> None:
        self.keep = keep
        self.min_gain = min_gain
        self.read = read
        self.write = write
        self.saved: list[SavedState] = []

    def save(self, llama: Any) -> None:
        """Keep what ``llama`` has evaluated, replacing any saved state it extends."""
        if self.keep == 0 or llama.n_tokens < self.min_gain:
            return
        tokens = tuple(int(t) for t in llama.input_ids[: llama.n_tokens])
        cells = self.read(llama)
        if not cells:
            return
        kept = [s for s in self.saved if common_prefix(s.tokens, tokens) < len(s.tokens)]
        self.saved = [*kept, SavedState(tokens, cells)][-self.keep :]

    def restore_for(self, llama: Any, prompt: Sequence[int]) -> int:
        """Load the saved state sharing the longest prefix with ``prompt``, when it shares
        at least ``min_gain`` tokens more than what ``llama`` holds now; how many tokens
        the load spares (0: nothing loaded)."""
        if not self.saved:
            return 0
        held = common_prefix(llama.input_ids[: llama.n_tokens], prompt)
        shared, best = max(
            ((common_prefix(s.tokens, prompt), s) for s in self.saved), key=lambda pair: pair[0]
        )
        if shared - held < self.min_gain:
            return 0
        if not self.write(llama, best.cells):
            llama.reset()  # nothing half-loaded stays: the prompt is computed in full
            return 0
        llama.input_ids[: len(best.tokens)] = best.tokens
        llama.n_tokens = len(best.tokens)
        llama._requires_eval = True  # no live logits: generate recomputes the last token
        return shared - held
