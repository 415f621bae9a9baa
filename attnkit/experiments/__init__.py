"""The self-attention lecture's claims, measured (``attnkit experiment``): one module per claim.

- ``data_size``: CNN against self-attention by training-set size (MNIST);
- ``rnn``: GRU / LSTM against self-attention: recall across a distance, time per training step against length;
- ``positions``: positional encodings beyond the training length;
- ``speakers``: speech recognition of a voice never heard: ``attnkit train asr`` with each FSDD speaker held out.

Each has a frozen config and its ``QUICK`` (tiny sizes) in ``configs/`` (without torch: the command line's help is
built from them; ``configs.fields`` holds the fields and checks the three share), ``run(out, config)``
(results.jsonl, a figure, a Markdown table) and ``report``; ``scaffold`` holds what their runs share (the run into
a folder, the report's summaries), ``runner`` the machinery under it. Only ``attnkit.cli`` imports this package.
"""
