"""Layer 3: task models composed from ``attnkit.nn`` (one file per model). Import submodules directly."""
