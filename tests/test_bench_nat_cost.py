"""bench/nat_cost.py: a CTC run's weights cut to fewer decoder layers and another row, and the share of references
such a row cannot align."""

import pytest
import torch

from attnkit.models.nat import NATConfig, NATModel
from attnkit.nn import TransformerConfig
from attnkit.tasks.translate_nat import NATTranslator


@pytest.fixture(scope="module")
def nat_cost(bench_script):
    return bench_script("nat_cost")


class Pieces:
    """Subwords: each character of the text is one id (a: 5, b: 6, ...; 0-4 are the special ids)."""

    def encode(self, text: str) -> list[int]:
        return [5 + ord(c) - ord("a") for c in text]


def translator(layers: int = 3, upsample: float = 1.5) -> NATTranslator:
    torch.manual_seed(0)
    tc = TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_encoder_layers=1, num_decoder_layers=layers,
                           dropout=0.0)
    return NATTranslator(NATModel(NATConfig(40, 40, tc, nat_loss="ctc", ctc_upsample=upsample)), Pieces(), {})


def test_a_cut_keeps_the_first_layers_and_sets_the_row(nat_cost):
    tr = translator()
    got = nat_cost.cut(tr, 1, 1.1)
    assert got.model.config.transformer.num_decoder_layers == 1 and got.model.config.ctc_upsample == 1.1
    assert len(got.model.decoder.layers) == 1
    theirs = tr.model.state_dict()
    for k, v in got.model.state_dict().items():
        assert torch.equal(v, theirs[k]), k
    ids = torch.tensor([tr.source_ids("abcdefghij", "x")])  # 10 characters + END: 11 -> a row of ceil(1.1 x 11)
    assert got.generate(ids).candidate_lengths.tolist() == [[13]]
    with pytest.raises(SystemExit, match="asks for 4 decoder layers; the run has 3"):
        nat_cost.cut(tr, 4, 1.5)


def test_unalignable_counts_tokens_and_repeats_beyond_the_row(nat_cost):
    tr = translator(upsample=1.0)  # a source of n characters: a row of n + 1 (END)
    src = ["abc", "abc", "abc", "abc"]
    # 3 tokens; 4; 3 tokens and one repeat (a blank between the b's: 4 positions); 4 and a repeat (5 > 4)
    ref = ["abc", "abcd", "abb", "abbc"]
    assert nat_cost.unalignable(tr, src, ref) == 25.0
    assert nat_cost.cuts("3:1.5,1:1.1") == [(3, 1.5), (1, 1.1)]
