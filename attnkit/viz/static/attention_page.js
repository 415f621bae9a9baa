// The attention page: one set of weights, drawn once the data is in.
start(attentionView);
