"""Speech classifier: masks (window & padding), padding invariance, backends agree, a tiny task it learns."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnkit import masks
from attnkit.models.speech import SpeechClassifier, SpeechConfig, spec_augment, warp_frequency
from attnkit.nn import TransformerConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(window=(1, 1), layers=1, subsample=1, n_mels=8) -> SpeechClassifier:
    enc = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=layers, num_decoder_layers=0,
                            dropout=0.0, norm_first=True, max_len=4096)
    return SpeechClassifier(SpeechConfig(n_mels=n_mels, num_classes=3, window=window, subsample=subsample,
                                         encoder=enc)).eval()


def test_mask_is_window_and_padding():
    m = tiny(window=(2, 1))
    mk = m.mask(torch.tensor([5, 3]))
    dense = masks.for_heads(mk).materialize(6, 6, 4)  # (B, 1, 6, 6)
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    band = (j >= i - 2) & (j <= i + 1)
    assert torch.equal(dense[0, 0], band & (j < 5))
    assert torch.equal(dense[1, 0], band & (j < 3))
    assert isinstance(tiny(window=None).mask(torch.tensor([4])), masks.Padding)


def test_padding_does_not_change_logits():
    m = tiny(window=(2, 2), layers=2)
    x = torch.randn(1, 12, 8)
    padded = torch.cat([x, 100 * torch.randn(1, 7, 8)], dim=1)  # garbage after the end
    a = m(x, torch.tensor([12]))
    b = m(torch.cat([padded, torch.randn(1, 19, 8)]), torch.tensor([12, 19]))[:1]
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert a.shape == (1, 3)


def test_truncated_attention_is_local():
    """Frame 0's encoder output ignores frame 20 when the receptive field is smaller than 20."""
    m = tiny(window=(1, 1), layers=2)
    x = torch.randn(1, 30, 8)
    y = x.clone()
    y[0, 20] += 5.0

    def hidden(inp):
        h = m.frontend(inp, torch.tensor([30]))  # (B, T, d)
        return m.encoder(h, m.mask(torch.tensor([30]))).last_hidden_state

    # conv front end: +-2 frames; 2 layers of window (1, 1): +-2 more
    torch.testing.assert_close(hidden(x)[0, :15], hidden(y)[0, :15])
    assert not torch.allclose(hidden(x)[0, 19:22], hidden(y)[0, 19:22])
    full = tiny(window=None, layers=2)
    full.load_state_dict(m.state_dict())
    hf = full.frontend(x, torch.tensor([30]))
    hf2 = full.frontend(y, torch.tensor([30]))
    pad = full.mask(torch.tensor([30]))
    assert not torch.allclose(full.encoder(hf, pad).last_hidden_state[0, 0],
                              full.encoder(hf2, pad).last_hidden_state[0, 0])  # full attention sees it


@pytest.mark.parametrize("window", [(2, 2), None])
def test_backends_agree(window):
    m = tiny(window=window, layers=2, subsample=2)
    x, lens = torch.randn(3, 40, 8), torch.tensor([40, 25, 9])
    ref = m(x, lens, backend="math")
    torch.testing.assert_close(m(x, lens), ref, atol=1e-5, rtol=1e-5)
    assert m.out_lengths(lens).tolist() == [20, 13, 5]
    logits, attn = m(x, lens, need_weights=True)
    assert len(attn) == 2 and attn[0].shape == (3, 2, 20, 20)
    if window is not None:
        assert attn[0][0, :, 0, 3:].abs().max() == 0  # outside the window: weight 0


def test_learns_tone_classes():
    """Three classes = which mel band carries the energy; a 1-layer model learns it in a few steps."""
    torch.manual_seed(0)
    n, t = 48, 20
    y = torch.arange(n) % 3
    x = torch.randn(n, t, 8) * 0.3
    for i in range(n):
        x[i, :, 2 * int(y[i]) + 1] += 2.0
    lens = torch.randint(10, t + 1, (n,))
    m = tiny(window=(1, 1)).train()
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    for _ in range(30):
        opt.zero_grad()
        F.cross_entropy(m(spec_augment(x, lens, freq_width=1, time_width=2), lens), y).backward()
        opt.step()
    m.eval()
    assert (m(x, lens).argmax(1) == y).float().mean() >= 0.95


def test_config_round_trip_and_errors():
    cfg = SpeechConfig(window=(3, 1), subsample=2)
    again = SpeechConfig.from_dict(cfg.to_dict())
    assert again == cfg and again.window == (3, 1)
    with pytest.raises(ValueError, match="`window` must be"):
        SpeechConfig(window=(3,))
    with pytest.raises(ValueError, match="`subsample`"):
        SpeechConfig(subsample=0)
    m = tiny()
    with pytest.raises(ValueError, match=r"`frames` must have shape \(B, T, 8\)"):
        m(torch.randn(2, 5, 7), torch.tensor([5, 5]))
    with pytest.raises(ValueError, match="`lengths` must have shape"):
        m(torch.randn(2, 5, 8), torch.tensor([5]))


def test_warp_frequency_stretches_each_rows_mel_axis():
    x = torch.arange(2 * 3 * 8, dtype=torch.float32).view(2, 3, 8)  # bins j hold 8 k + j
    same = warp_frequency(x, torch.tensor([1.0, 1.0]))
    torch.testing.assert_close(same, x)
    out = warp_frequency(x, torch.tensor([2.0, 0.5]))
    torch.testing.assert_close(out[0, 0], torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]))  # bin j reads j / 2
    torch.testing.assert_close(out[1, 2], 40 + torch.tensor([0.0, 2.0, 4.0, 6.0, 7.0, 7.0, 7.0, 7.0]))  # 2 j, the top
    with pytest.raises(ValueError, match="`factors` must be \\(2,\\) positive numbers"):
        warp_frequency(x, torch.tensor([1.0, 0.0]))
