"""The experiments' shared config fields and checks (without torch): ``check`` says which field is wrong, the
fields document themselves."""

from dataclasses import dataclass, fields

import pytest

from attnkit.experiments.configs.fields import check, lr_field, seeds_field, trained_field


@dataclass(frozen=True)
class Cfg:
    models: tuple[str, ...] = trained_field(("a", "b"))
    seeds: int = seeds_field("data")
    lengths: tuple[int, ...] = (4, 8)
    lr: float = lr_field(1e-3, " for a")
    d_model: int = 8

    def __post_init__(self):
        check(self, whole={"lengths": (2, 16)}, choices={"models": ("a", "b")}, heads=4)


@pytest.mark.parametrize("changes, message", [
    ({"models": ("a", "c")}, "Cfg: `models` must be some of ('a', 'b'), got ('a', 'c')"),
    ({"models": ()}, "Cfg: `models` must be some of ('a', 'b'), got ()"),
    ({"lengths": (4, 17)}, "Cfg: `lengths` must be whole numbers in [2, 16], got (4, 17)"),
    ({"lengths": (4, 4)}, "Cfg: `lengths` holds 4 twice"),
    ({"models": ("b", "b")}, "Cfg: `models` holds 'b' twice"),
    ({"d_model": 6}, "Cfg: `d_model` must be a multiple of the 4 heads, got 6"),
    ({"seeds": 0}, "Cfg: `seeds`"),
    ({"lr": 0.0}, "Cfg: `lr`"),
])
def test_check_names_the_field(changes, message):
    with pytest.raises(ValueError) as e:
        Cfg(**changes)
    assert str(e.value).startswith(message)


def test_the_fields_document_themselves():
    meta = {f.name: f.metadata for f in fields(Cfg)}
    assert meta["models"]["choices"] == ("a", "b") and meta["models"]["help"] == "the models to train"
    assert meta["seeds"]["help"] == "seeds per point (0, 1, ...): data" and Cfg().seeds == 3
    assert meta["lr"]["help"] == "AdamW's peak learning rate for a" and Cfg().lr == 1e-3
