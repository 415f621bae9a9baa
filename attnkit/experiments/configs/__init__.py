"""Each experiment's config and quick sizes, without torch: ``attnkit experiment NAME --help`` is built from them."""
