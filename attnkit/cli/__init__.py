"""Layer 3: the command line. Thin commands: parse, call, print."""
