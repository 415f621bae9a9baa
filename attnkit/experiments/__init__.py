"""The self-attention lecture's claims, measured (``attnkit experiment``): one module per claim.

- ``data_size``: CNN against self-attention by training-set size (MNIST);
- ``rnn``: GRU / LSTM against self-attention: recall across a distance, time per training step against length;
- ``positions``: positional encodings beyond the training length;
- ``speakers``: speech recognition of a voice never heard: ``attnkit train asr`` with each FSDD speaker held out.

Each has a frozen config (``QUICK``: tiny sizes), ``run(out, config)`` (results.jsonl, a figure, a Markdown table)
and ``report``; ``runner`` holds what they share. Only ``attnkit.cli`` imports this package.
"""
