"""The self-attention lecture's claims, measured (``attnkit experiment``): one module per claim.

- ``data_size``: CNN against self-attention by training-set size (MNIST);
- ``rnn``: GRU / LSTM against self-attention: recall across a distance, time per training step against length;
- ``positions``: positional encodings beyond the training length.

Each has a frozen config (``QUICK``: tiny sizes), ``run(out, config)`` (results.jsonl, a figure, a Markdown table)
and ``report``; ``scaffold`` holds what their configs and runs share (fields, checks, the run into a
folder, the report's summaries), ``runner`` the machinery under it. Only ``attnkit.cli`` imports this package.
"""
