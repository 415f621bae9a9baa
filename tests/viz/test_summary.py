"""``attnkit attend``'s summary: heads sorted by what their strongest key is, markers left out."""

import torch

from attnkit.viz.summary import attention_summary, head_roles

TOKENS = ["[CLS]", "time", "flies", "like", "an", "arrow", "[SEP]"]


def patterned():
    """(2 layers, 4 heads, 7, 7): previous token, next token, [SEP] (a parked head), and a content head."""
    w = torch.full((2, 4, 7, 7), 0.01)
    for i in range(7):
        w[0, 0, i, max(i - 1, 0)] = 1.0  # previous
        w[0, 1, i, min(i + 1, 6)] = 1.0  # next
        w[0, 2, i, 6] = 1.0  # parks on [SEP]
        w[0, 3, i, 5 if i != 5 else 1] = 1.0  # everything looks at "arrow" (a word, not a position)
    w[1] = w[0, 2]  # layer 2: every head parks
    return w / w.sum(-1, keepdim=True)


def test_roles():
    roles = head_roles(patterned(), TOKENS)
    assert roles["previous token"] == [(0, 0, 5)] and roles["next token"] == [(0, 1, 5)]
    assert roles["[CLS]/[SEP]"] == [(0, 2, 5), (1, 0, 5), (1, 1, 5), (1, 2, 5), (1, 3, 5)]
    assert [(n, h) for n, h, _ in roles["other words"]] == [(0, 3)] and roles["itself"] == []


def test_summary_lines_say_what_the_heads_do():
    lines = attention_summary(patterned(), TOKENS)
    assert lines[0].startswith("What the 8 heads do (2 layers x 4 heads)") and "(5 words)" in lines[0]
    text = "\n".join(lines)
    assert "previous token:  1 head   L1H1" in text and "next token:  1 head   L1H2" in text
    assert "[CLS]/[SEP]:  5 heads  L1H3, L2H1, L2H2, L2H3, L2H4" in text
    markers = next(line for line in lines if line.startswith("Weight the words put on"))
    l1, l2 = (float(x) for x in markers.split("L1 ")[1].split("  L2 "))
    assert 0.2 < l1 < 0.4 and l2 > 0.9  # one of four heads parks in layer 1, all of them in layer 2
    links = next(line for line in lines if line.startswith("Strongest word -> word links in layer 2"))
    assert "[SEP]" not in links.split(":", 1)[1] and "[CLS]" not in links.split(":", 1)[1]


def test_only_markers():
    lines = attention_summary(torch.full((1, 1, 2, 2), 0.5), ["[CLS]", "[SEP]"])
    assert len(lines) == 1 and "(0 words)" in lines[0]
