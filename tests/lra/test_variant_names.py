"""The command line's variant choices (read without torch) are the variants' table's names, in its order."""

from attnkit.lra.settings import VARIANT_NAMES
from attnkit.nn.variants import VARIANTS


def test_variant_names_are_the_tables():
    assert VARIANT_NAMES == tuple(VARIANTS)
