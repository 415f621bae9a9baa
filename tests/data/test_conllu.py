import gzip

import pytest

from attnkit.data.conllu import read_conllu

GOOD = """# sent_id = 1
# text = I saw a saw.
1\tI\tI\tPRON\tPRP\t_\t2\tnsubj\t_\t_
2\tsaw\tsee\tVERB\tVBD\t_\t0\troot\t_\t_
3\ta\ta\tDET\tDT\t_\t4\tdet\t_\t_
4\tsaw\tsaw\tNOUN\tNN\t_\t2\tobj\t_\tSpaceAfter=No
5\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_

# sent_id = 2
1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
3.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t0:root\t_

"""


def test_reads_words_and_tags_skipping_ranges_and_empty_nodes(tmp_path):
    p = tmp_path / "a.conllu.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write(GOOD)
    s = read_conllu(p)
    assert [x.words for x in s] == [("I", "saw", "a", "saw", "."), ("do", "n't", "go")]
    assert s[0].tags == ("PRON", "VERB", "DET", "NOUN", "PUNCT")
    assert read_conllu(p, "xpos")[1].tags == ("VBP", "RB", "VB")
    assert s[1].line == 9


def test_malformed_line_names_file_and_line(tmp_path):
    p = tmp_path / "bad.conllu"
    p.write_text(GOOD.replace("3\ta\ta\tDET", "3\ta\ta DET"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.conllu:5: .*10 tab-separated columns, got 9"):
        read_conllu(p)
    p.write_text(GOOD.replace("3\ta\t", "x\ta\t"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.conllu:5: bad ID 'x'"):
        read_conllu(p)


def test_empty_and_missing(tmp_path):
    p = tmp_path / "empty.conllu"
    p.write_text("# only a comment\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty dataset"):
        read_conllu(p)
    with pytest.raises(FileNotFoundError):
        read_conllu(tmp_path / "nope.conllu")
    with pytest.raises(ValueError, match="`field`"):
        read_conllu(p, "lemma")
