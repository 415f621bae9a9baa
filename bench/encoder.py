"""Training throughput (tokens/s) of an attnkit encoder stack against Hugging Face BertModel (sdpa)
and torch.nn.TransformerEncoder at the same shape: batch 16, length 128, d_model 256, 4 heads,
4 layers, d_ff 1024, GELU, dropout 0.1, post-LN; each with a token embedding + learned positions,
AdamW step included. Dropout sits in the same places in all three: embeddings, each sub-layer's
output, none inside the FFN (BERT has none there; torch's layer's is switched off).
``--attention-dropout`` (dropout on the attention weights) is set identically in all three:
0.1 is both peers' default; 0.0 lets every SDPA call use its fused kernel.

    .venv/bin/python bench/encoder.py [--repeats 7] [--steps 3] [--attention-dropout 0.1]
"""

from __future__ import annotations

import argparse
import datetime

import torch
from _timing import interleaved_medians, machine, table
from torch import nn

from attnkit.nn import Encoder, TransformerConfig

B, L, D, H, N, FF, V = 16, 128, 256, 4, 4, 1024, 8000


class AttnkitStack(nn.Module):
    def __init__(self, attn_drop: float):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.encoder = Encoder(TransformerConfig(d_model=D, num_heads=H, d_ff=FF, num_encoder_layers=N,
                                                 activation="gelu", positional="learned", max_len=L,
                                                 attention_dropout=attn_drop))

    def forward(self, ids):
        return self.encoder(self.embed(ids)).last_hidden_state


class TorchStack(nn.Module):
    def __init__(self, attn_drop: float):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.pos = nn.Embedding(L, D)
        layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.1, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, N, enable_nested_tensor=False)
        self.drop = nn.Dropout(0.1)  # on the embedding sum, as BERT and attnkit do
        for lyr in self.encoder.layers:
            lyr.self_attn.dropout = attn_drop  # the layer's one `dropout` also sets the attention's
            lyr.dropout = nn.Dropout(0.0)  # and the FFN-inner one, which BERT and attnkit do not have

    def forward(self, ids):
        x = self.drop(self.embed(ids) + self.pos(torch.arange(ids.shape[1])))
        return self.encoder(x)


def hf_stack(attn_drop: float):
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=V, hidden_size=D, num_hidden_layers=N, num_attention_heads=H, intermediate_size=FF,
                     max_position_embeddings=L, attn_implementation="sdpa", attention_probs_dropout_prob=attn_drop)
    model = BertModel(cfg, add_pooling_layer=False)

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, ids):
            return self.m(input_ids=ids).last_hidden_state

    return Wrap()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--steps", type=int, default=3, help="training steps per timing sample")
    p.add_argument("--attention-dropout", type=float, default=0.1, help="dropout on attention weights, all models")
    a = p.parse_args()
    torch.manual_seed(0)
    ids = torch.randint(0, V, (B, L))
    d = a.attention_dropout
    models = {"attnkit": AttnkitStack(d), "hf_bert_sdpa": hf_stack(d), "torch_encoder": TorchStack(d)}
    params = {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()}
    fns = {}
    for name, m in models.items():
        m.train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)

        def step(m=m, opt=opt):
            out = m(ids)
            loss = out.float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        fns[name] = step
    t = interleaved_medians(fns, iters=a.steps, repeats=a.repeats)
    tok = {k: B * L / v for k, v in t.items()}
    best_peer = max(tok["hf_bert_sdpa"], tok["torch_encoder"])
    print(f"# encoder training, B={B}, L={L}, d={D}, h={H}, layers={N}, d_ff={FF}, attention dropout {d}\n"
          f"# {machine()}, "
          f"{datetime.date.today()}, median of {a.repeats} samples x {a.steps} steps")
    rows = [[k, params[k], tok[k], tok[k] / tok["attnkit"]] for k in models]
    print(table(["model", "params", "tokens/s", "ratio to attnkit"], rows))
    print(f"attnkit / faster peer = {tok['attnkit'] / best_peer:.3f} (goal >= 1.0)")


if __name__ == "__main__":
    main()
