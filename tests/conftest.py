import pytest
import torch
from hypothesis import settings

settings.register_profile("attnkit", max_examples=25, deadline=None, derandomize=True)
settings.load_profile("attnkit")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
