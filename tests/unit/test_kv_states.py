"""Which saved key/value state a prompt gets (tools/models/kv_states.py), on a stand-in
for a ``Llama`` that holds tokens; the real model's restored state is checked in
tests/slow/test_call_account.py."""

from __future__ import annotations

import numpy as np
import pytest

from tools.models.kv_states import KVStates, common_prefix


class HeldTokens:
    """What KVStates reads and writes of a ``Llama``: its evaluated tokens."""

    def __init__(self) -> None:
        self.input_ids = np.zeros(256, dtype=np.intc)
        self.n_tokens = 0
        self._requires_eval = False
        self.cells: bytes = b""

    def evaluate(self, tokens: list[int]) -> None:
        self.input_ids[: len(tokens)] = tokens
        self.n_tokens = len(tokens)
        self.cells = bytes(str(tokens), "ascii")
        self._requires_eval = False

    def reset(self) -> None:
        self.n_tokens = 0


def read(llama: HeldTokens) -> bytes:
    return llama.cells


def write(llama: HeldTokens, cells: bytes) -> bool:
    llama.cells = cells
    return True


CONTEXT_A = list(range(100, 160))  # 60 tokens: the generator's context
CONTEXT_B = list(range(100, 110)) + list(range(500, 550))  # the verifier's


def states(**kw) -> KVStates:
    return KVStates(**{"keep": 3, "min_gain": 32, "read": read, "write": write, **kw})


def test_a_prompt_gets_the_earlier_context_another_call_overwrote():
    llama, saved = HeldTokens(), states()
    llama.evaluate([*CONTEXT_A, 1, 2])
    saved.save(llama)
    llama.evaluate([*CONTEXT_B, 3])
    saved.save(llama)
    prompt = [*CONTEXT_A, 7, 8, 9]
    assert saved.restore_for(llama, prompt) == 60 - 10  # the 10 shared with B were held
    assert llama.n_tokens == 62 and common_prefix(llama.input_ids[:62], prompt) == 60
    assert llama.cells == bytes(str([*CONTEXT_A, 1, 2]), "ascii")
    assert llama._requires_eval  # the restored state has no logits to sample from


@pytest.mark.parametrize("held", [[*CONTEXT_A, 5], CONTEXT_A[:40]])
def test_nothing_is_loaded_unless_it_spares_enough(held):
    llama, saved = HeldTokens(), states()
    llama.evaluate([*CONTEXT_A, 1])
    saved.save(llama)
    llama.evaluate(held)
    assert saved.restore_for(llama, [*CONTEXT_A, 9]) == 0
    assert llama.n_tokens == len(held)


def test_a_state_that_extends_a_saved_one_replaces_it_and_only_the_newest_are_kept():
    llama, saved = HeldTokens(), states(keep=2)
    llama.evaluate(CONTEXT_A)
    saved.save(llama)
    llama.evaluate([*CONTEXT_A, 1, 2, 3])
    saved.save(llama)
    assert [len(s.tokens) for s in saved.saved] == [63]
    for start in (700, 800):
        llama.evaluate(list(range(start, start + 40)))
        saved.save(llama)
    assert [s.tokens[0] for s in saved.saved] == [700, 800]


def test_a_short_state_or_keep_zero_saves_nothing():
    llama = HeldTokens()
    llama.evaluate(CONTEXT_A[:20])
    saved = states()
    saved.save(llama)
    llama.evaluate(CONTEXT_A)
    off = states(keep=0)
    off.save(llama)
    assert saved.saved == [] and off.saved == []


def test_a_state_llama_cpp_refuses_leaves_nothing_half_loaded():
    llama, saved = HeldTokens(), states(write=lambda _llama, _cells: False)
    llama.evaluate(CONTEXT_A)
    saved.save(llama)
    llama.evaluate(CONTEXT_B)
    assert saved.restore_for(llama, [*CONTEXT_A, 1]) == 0
    assert llama.n_tokens == 0  # computed in full, from an empty cache
