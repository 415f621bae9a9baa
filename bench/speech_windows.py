"""Truncated self-attention window sizes vs full attention on FSDD spoken digits (accuracy and time).

    python bench/speech_windows.py --windows 2 4 8 16 full --epochs 20

For each window (frames left and right of each query after the front end; 'full' = padding mask
only), trains ``attnkit train speech``'s model with the training engine on the official split
(index 0-4 = test) and reports test accuracy, training time, the median time of one training step
on a fixed batch of 32 real utterances, and the median forward time of one 30 s input (3000 frames,
where the automatic backend choice switches to the blocked local kernel for windows). With
``--holdout-speaker NAME`` the split is one speaker held out entirely instead.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attnkit.functional import select_backend  # noqa: E402
from attnkit.masks import for_heads  # noqa: E402
from attnkit.nn import TransformerConfig  # noqa: E402
from attnkit.tasks import speech as S  # noqa: E402
from attnkit.tasks.options import parse_window  # noqa: E402
from attnkit.tasks.options import speech as SO  # noqa: E402
from attnkit.train import TrainConfig, Trainer  # noqa: E402


def median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--windows", nargs="+", default=["2", "4", "8", "16", "full"])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--d-model", type=int, default=96)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=192)
    p.add_argument("--subsample", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--holdout-speaker", default=None)
    p.add_argument("--data", type=Path, default=None)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--long-frames", type=int, default=3000)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="keep run folders here (default: a temp dir)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    enc = TransformerConfig(**{**SO.ENCODER_DEFAULTS, "d_model": args.d_model, "num_heads": args.heads,
                               "d_ff": args.d_ff, "num_encoder_layers": args.layers})
    train_cfg = TrainConfig(**{**SO.TRAIN_DEFAULTS, "epochs": args.epochs, "batch_size": args.batch_size,
                               "lr": args.lr, "seed": args.seed, "progress": False})
    print(f"# torch {torch.__version__}, {platform.machine()}, threads {torch.get_num_threads()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; split: "
          f"{'speaker ' + args.holdout_speaker + ' held out' if args.holdout_speaker else 'official (index 0-4 test)'}")
    print(f"# encoder d={args.d_model} layers={args.layers} heads={args.heads} d_ff={args.d_ff} "
          f"subsample={args.subsample}; epochs={args.epochs} batch={args.batch_size} lr={args.lr} seed={args.seed}")
    print("| window (L,R) | test acc (%) | train s (total) | train step ms (median) | 30 s fwd ms (median) "
          "| long-input backend |")
    print("|---|---|---|---|---|---|")
    root = args.out or Path(tempfile.mkdtemp(prefix="speech_windows_"))
    for w in args.windows:
        window = parse_window(w)
        ns = argparse.Namespace(data=args.data, download=False, window=window, subsample=args.subsample, n_mels=40,
                                holdout_speaker=args.holdout_speaker, dev=False, augment=True)
        task = S.build(ns, enc, seed=args.seed)
        result = Trainer(task, train_cfg).fit(root / f"w{w}", overwrite=True)
        model = task.model
        batch = S.collate(task.train[:32])
        opt = torch.optim.SGD(model.parameters(), lr=0.0)

        def step(model=model, batch=batch, opt=opt):
            logits, y = S.make_forward(False)(model, batch)
            opt.zero_grad()
            F.cross_entropy(logits, y).backward()

        model.train()
        t_step = median_time(step, args.repeats)
        model.eval()
        x = torch.randn(1, args.long_frames, 40)
        lens = torch.tensor([args.long_frames])
        with torch.no_grad():
            t_long = median_time(lambda model=model, x=x, lens=lens: model(x, lens), args.repeats)
            n = model.out_lengths(lens)
            h = torch.randn(1, enc.num_heads, int(n), enc.head_dim)  # (B, H, T', dh) as MultiHeadAttention sends
            backend = select_backend(h, h, h, for_heads(model.mask(n)), None, False)
        label = "full" if window is None else f"{window[0]},{window[1]}"
        print(f"| {label} | {100 * result['test']['accuracy']:.2f} | {result['train_seconds']:.0f} | "
              f"{1000 * t_step:.1f} | {1000 * t_long:.1f} | {backend} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
