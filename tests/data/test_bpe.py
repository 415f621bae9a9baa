import pytest

from attnkit.data.bpe import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Subwords, learn_bpe

TEXTS = ["Ein Mann fährt Fahrrad.", "Eine Frau fährt ein rotes Auto.", "Zwei Hunde spielen im Schnee.",
         "A man rides a bike.", "A woman drives a red car.", "Two dogs play in the snow."] * 20


def test_learn_encode_decode_round_trip(tmp_path):
    sw = learn_bpe(TEXTS, 120)
    assert sw.size <= 120
    assert [sw.piece(i) for i in (PAD_ID, BOS_ID, EOS_ID, UNK_ID)] == ["<pad>", "<s>", "</s>", "<unk>"]
    for t in TEXTS[:6] + ["Ein Hund fährt Auto.", "spaces   stay "]:
        assert sw.decode(sw.encode(t)) == t
    assert sw.pieces("Ein Mann fährt Fahrrad.")[-1] == "."  # punctuation is a piece of its own
    assert sw.decode([BOS_ID, *sw.encode("Zwei Hunde."), EOS_ID, PAD_ID]) == "Zwei Hunde."
    path = sw.save(tmp_path / "bpe.json")
    again = Subwords.load(path)
    assert again.encode("Ein Auto.") == sw.encode("Ein Auto.")


def test_unknown_characters_and_bad_files(tmp_path):
    sw = learn_bpe(TEXTS, 120)
    assert sw.unknown_characters("Ein Mann 🚲 fährt 自自.") == ["🚲", "自"]
    assert UNK_ID in sw.encode("🚲")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="cannot read the subword vocabulary"):
        Subwords.load(bad)
    with pytest.raises(ValueError, match="vocab_size"):
        learn_bpe(TEXTS, 3)
