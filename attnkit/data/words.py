"""Raw English text -> words split the way UD English EWT splits them, for tagging raw sentences.

``split_words("I don't think it's John's.")`` -> ``["I", "do", "n't", "think", "it", "'s", "John", "'s", "."]``

NLTK's Treebank-style word tokenizer (``NLTKWordTokenizer``, the one behind ``nltk.word_tokenize``)
does the work: punctuation, clitics (``do n't``, ``it 's``, ``I 'm``, ``can not``, ``gon na``) and the
possessive ``'s`` as separate words, as in the Penn Treebank, whose conventions EWT follows. Words
keep their characters exactly (NLTK's spans are used, so quotes stay ``"`` rather than becoming
`````/``''``; a curly apostrophe is matched like a straight one). Three EWT conventions are added:

- a hyphenated compound is split (``search-engine`` -> ``search - engine``) unless its first part is
  a prefix EWT keeps attached (``e-mail``, ``non-profit``, ``re-elect``, ...) or it is all digits
  (phone numbers);
- a slash between words is a word of its own (``and/or`` -> ``and / or``), not inside numbers (dates);
- URLs and e-mail addresses stay whole; runs of ``?`` / ``!`` stay one word.

``treebank_words(text)`` is the plain Penn Treebank split, as SST-2's sentences are split: the same
tokenizer and sentence cut, without EWT's three additions (``old-fashioned`` stays one word) and with the
Treebank's quotes (a double quote opening a quotation becomes two backquotes, one closing it two single quotes).

Text of several sentences is cut into sentences first (a period before a space ends one unless it ends
a title, an abbreviation or an initial), since the tokenizer splits off a period only at the end.

Measured against the treebank's own words (``# text`` of each sentence against its FORMs): exact
for 91.4% of EWT dev's 2001 sentences and 90.3% of test's 2077 (the rest are mostly typos the
annotators split or joined, such as ``you r``, and rare hyphen or symbol cases); 98.8% of the pairs of
consecutive sentences of a paragraph that match alone also match joined by a space (99.3% in test).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["split_words", "treebank_words"]

# First parts of hyphenated words that EWT keeps whole (from the hyphenated forms of its train set).
KEEP_PREFIXES = frozenset({"e", "non", "mid", "pre", "anti", "re", "post", "co", "over", "pro", "multi", "ex",
                           "sub", "semi", "cross", "neo", "psycho", "socio", "counter", "inter", "intra", "self"})
_WHOLE = re.compile(r"(?:https?://|www\.)\S+|[\w.+-]+@[\w-]+(?:\.[\w-]+)*", re.I)  # URLs, e-mail addresses
_TRAILING = ".,;:!?)\"'"
# A sentence ends at . ! ? (then maybe a closing quote or bracket) and a space before a word, unless the
# period ends a title, an abbreviation or an initial (Mr. Smith, e.g. this, J. Aron). The tokenizer splits off a
# period only at the end of its input, so sentences are tokenised one at a time, as nltk.word_tokenize does.
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]?(\s+)(?=[\"'“‘(\[]?\w)")  # curly quotes too
_ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "drs", "prof", "capt", "gen", "gov", "sen", "rep", "st", "jr", "sr", "mt", "vs", "etc",
    "inc", "corp", "ltd", "co", "pvt", "dept", "ext", "vol", "approx", "est", "ps",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"})


def _sentences(text: str) -> list[str]:
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        before = re.search(r"(\S+)\.$", text[start:m.start(1)])  # the word a period ends, if any
        if before and (before.group(1).lower() in _ABBREVIATIONS or "." in before.group(1)
                       or (len(before.group(1)) == 1 and before.group(1).isalpha())):
            continue  # Mr. / e.g. / U.S. / J.
        out.append(text[start:m.start(1)])
        start = m.end(1)
    return out + [text[start:]]


@lru_cache(maxsize=1)
def _tokenizer():
    try:
        from nltk.tokenize.destructive import NLTKWordTokenizer
    except ImportError as e:
        raise ImportError("split_words needs nltk: pip install 'attnkit[train]'") from e
    return NLTKWordTokenizer()


def _pieces(text: str):
    """(piece, whole) chunks: URLs / e-mail addresses are whole; the text between them is tokenised
    a sentence at a time."""
    pos = 0
    for m in _WHOLE.finditer(text):
        url = m.group().rstrip(_TRAILING)
        yield from ((s, False) for s in _sentences(text[pos:m.start()]))
        yield url, True
        pos = m.start() + len(url)
    yield from ((s, False) for s in _sentences(text[pos:]))


def _split_compound(token: str) -> list[str]:
    if "/" in token and len(token) > 1 and not re.fullmatch(r"[\d/]+", token):
        return [w for part in re.split(r"(/)", token) if part for w in _split_compound(part)]
    parts = token.split("-")
    if len(parts) == 1 or not all(parts) or parts[0].lower() in KEEP_PREFIXES or all(p.isdigit() for p in parts):
        return [token]
    out = [parts[0]]
    for p in parts[1:]:
        out += ["-", p]
    return out


def split_words(text: str) -> list[str]:
    """The words of ``text`` as UD English EWT would split them (see the module docstring)."""
    words: list[str] = []
    for piece, whole in _pieces(text):
        if whole:
            words.append(piece)
            continue
        straight = piece.replace("\u2019", "'").replace("\u2018", "'")  # same length: spans stay valid
        end = -1
        for a, b in _tokenizer().span_tokenize(straight):
            if a == end and piece[a:b] in ("?", "!") and words and set(words[-1]) <= {"?", "!"}:
                words[-1] += piece[a:b]  # "??" and "?!" are one word in EWT
            else:
                words += _split_compound(piece[a:b])
            end = b
    return words


def treebank_words(text: str) -> list[str]:
    """The words of ``text`` as the Penn Treebank (and SST-2) split them: NLTK's Treebank tokenizer a sentence at a
    time, hyphenated words kept whole, double quotes as the Treebank's two backquotes / two single quotes."""
    return [w for sentence in _sentences(text) for w in _tokenizer().tokenize(sentence)]
