"""A deterministic web search over a small fixed corpus.

The reference finding's first run scored 73% because the mock search only matched an exact key,
so reasonable paraphrases got "no match" and the model looped to the step cap: a harness
artifact. This engine behaves like a (very small) real one instead: it normalises both query and
pages (lowercase, punctuation stripped, stopwords dropped, plurals and common suffixes folded,
synonyms mapped to one term) and ranks pages with BM25, so "RTX 5090 specs VRAM GB", "rtx 5090
vram" and "How much video memory does the GeForce RTX 5090 have?" all land on the same page.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

from benchrig.harness.tools.base import Tool, ToolError

MAX_HITS = 3
NO_MATCH_PREFIX = "no match"

# BM25 parameters: the usual defaults; the corpus is tiny, so they matter little.
_K1 = 1.2
_B = 0.75
# The title is repeated in the indexed text so that a page *about* a thing beats one that
# merely mentions it.
_TITLE_WEIGHT = 2


@dataclass(frozen=True)
class Page:
    title: str
    url: str
    text: str


CORPUS: tuple[Page, ...] = (
    Page(
        "NVIDIA GeForce RTX 5090 specifications",
        "https://gpuspecs.example.com/nvidia/geforce-rtx-5090",
        "The GeForce RTX 5090 (Blackwell, GB202) has 32 GB of GDDR7 VRAM on a 512-bit memory "
        "bus, 21,760 CUDA cores and a 575 W total graphics power.",
    ),
    Page(
        "NVIDIA GeForce RTX 4090 specifications",
        "https://gpuspecs.example.com/nvidia/geforce-rtx-4090",
        "The GeForce RTX 4090 (Ada Lovelace, AD102) has 24 GB of GDDR6X VRAM on a 384-bit "
        "memory bus, 16,384 CUDA cores and a 450 W total graphics power.",
    ),
    Page(
        "NVIDIA GeForce RTX 5080 specifications",
        "https://gpuspecs.example.com/nvidia/geforce-rtx-5080",
        "The GeForce RTX 5080 (Blackwell, GB203) has 16 GB of GDDR7 VRAM on a 256-bit memory "
        "bus, 10,752 CUDA cores and a 360 W total graphics power.",
    ),
    Page(
        "NVIDIA GeForce RTX 3090 specifications",
        "https://gpuspecs.example.com/nvidia/geforce-rtx-3090",
        "The GeForce RTX 3090 (Ampere, GA102) has 24 GB of GDDR6X VRAM on a 384-bit memory "
        "bus, 10,496 CUDA cores and a 350 W total graphics power.",
    ),
    Page(
        "NVIDIA H100 Tensor Core GPU datasheet",
        "https://gpuspecs.example.com/nvidia/h100-sxm",
        "The H100 SXM data-center accelerator (Hopper) carries 80 GB of HBM3 memory with "
        "3.35 TB/s of bandwidth and up to 700 W of power.",
    ),
    # Distractors: on topic for some queries, but they do not answer the suite's questions.
    Page(
        "RTX 5090 launch: price and availability",
        "https://news.example.com/2025/01/rtx-5090-launch-price",
        "NVIDIA's flagship RTX 5090 went on sale on January 30, 2025 at an MSRP of $1,999; "
        "partner cards sold out within minutes at most retailers.",
    ),
    Page(
        "GDDR7 explained: what the new graphics memory standard changes",
        "https://news.example.com/2024/06/gddr7-explained",
        "GDDR7 uses PAM3 signalling to reach per-pin data rates far beyond GDDR6X, which is why "
        "next-generation graphics cards can widen bandwidth without wider buses.",
    ),
    Page(
        "How to check how much VRAM your graphics card has",
        "https://howto.example.com/check-gpu-vram",
        "On Windows open Task Manager, Performance, GPU and read 'Dedicated GPU memory'; on "
        "Linux run nvidia-smi and read the memory total column.",
    ),
    Page(
        "ExampleCloud API rate limits (official documentation)",
        "https://docs.examplecloud.dev/api/rate-limits",
        "Reference page listing the request quotas of every ExampleCloud API plan (Free, Pro, "
        "Enterprise). Fetch this page for the current per-minute limits.",
    ),
    Page(
        "ExampleCloud pricing",
        "https://examplecloud.dev/pricing",
        "Compare ExampleCloud plans: Free, Pro at $49 per month and Enterprise with custom "
        "contracts; annual billing saves two months.",
    ),
    Page(
        "ExampleCloud status",
        "https://status.examplecloud.dev",
        "Live status of ExampleCloud services. All systems operational; see the history tab for "
        "past incidents.",
    ),
    Page(
        "Mount Everest",
        "https://encyclopedia.example.org/wiki/Mount_Everest",
        "Mount Everest is Earth's highest mountain above sea level, with a summit elevation of "
        "8,849 metres, on the border between Nepal and China.",
    ),
    Page(
        "Speed of light",
        "https://encyclopedia.example.org/wiki/Speed_of_light",
        "The speed of light in vacuum is exactly 299,792,458 metres per second, by definition "
        "of the metre.",
    ),
)

# Query words that say nothing about which page is wanted. (A name, not a literal, is split so
# linters do not turn the list into one very long line.)
_STOPWORD_TEXT = (
    "a an and are as at be been being but by can could did do does doing for from had has have "
    "having how i in into is it its me my of on or our out over please so some such than that "
    "the their them then there these they this those to too up us very was we were what when "
    "where which who whom why will with would you your much many tell find show give get look "
    "search lookup about any info information"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# Map several spellings of one idea onto a single index term (applied after stemming).
SYNONYMS: dict[str, str] = {
    "memory": "vram",
    "vram": "vram",
    "vmem": "vram",
    "framebuffer": "vram",
    "gigabyte": "gb",
    "gib": "gb",
    "spec": "spec",
    "specification": "spec",
    "datasheet": "spec",
    "gpu": "gpu",
    "card": "gpu",
    "graphic": "gpu",
    "accelerator": "gpu",
    "price": "price",
    "cost": "price",
    "msrp": "price",
    "quota": "limit",
    "limit": "limit",
    "throttle": "limit",
    "throttling": "limit",
    "doc": "doc",
    "documentation": "doc",
    "reference": "doc",
    "height": "elevation",
    "tall": "elevation",
    "high": "elevation",
    "highest": "elevation",
    "meter": "metre",
}

_TOKEN = re.compile(r"[a-z]+|\d+")


def _stem(word: str) -> str:
    """Fold plurals and a few suffixes; crude but applied identically to query and pages."""
    if word.isdigit() or len(word) <= 3:
        return word
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("es", "e"), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            return word[: -len(suffix)] + repl
    return word


def tokenize(text: str) -> list[str]:
    """Lowercase, split letters from digits ("rtx5090" -> rtx, 5090), drop stopwords, fold."""
    terms: list[str] = []
    for raw in _TOKEN.findall(text.lower().replace(",", "")):
        if raw in STOPWORDS:
            continue
        stemmed = _stem(raw)
        terms.append(SYNONYMS.get(stemmed, SYNONYMS.get(raw, stemmed)))
    return terms


class _Index:
    """A BM25 index over :data:`CORPUS`, built once at import time."""

    def __init__(self, pages: tuple[Page, ...]) -> None:
        self.pages = pages
        self.docs = [Counter(tokenize(f"{p.title} " * _TITLE_WEIGHT + p.text)) for p in pages]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg_len = sum(self.lengths) / len(self.lengths)
        df = Counter(term for d in self.docs for term in d)
        n = len(pages)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.vocabulary = sorted(self.idf)

    def score(self, terms: set[str], i: int) -> float:
        doc, norm = self.docs[i], _K1 * (1 - _B + _B * self.lengths[i] / self.avg_len)
        total = 0.0
        for term in terms & doc.keys():
            tf = doc[term]
            total += self.idf[term] * tf * (_K1 + 1) / (tf + norm)
        return total

    def search(self, query: str, limit: int = MAX_HITS) -> list[tuple[float, Page]]:
        return self.rank(set(tokenize(query)), limit)

    def rank(self, terms: set[str], limit: int = MAX_HITS) -> list[tuple[float, Page]]:
        scored = [(self.score(terms, i), i) for i in range(len(self.pages))]
        # Ties break on corpus order so results never depend on hash or sort instability.
        ranked = sorted((s, i) for s, i in scored if s > 0) if terms else []
        ranked.sort(key=lambda si: (-si[0], si[1]))
        return [(s, self.pages[i]) for s, i in ranked[:limit]]


INDEX = _Index(CORPUS)


# How alike a query word and an index term must be (difflib ratio) to call the word a near miss.
NEAR_MISS_CUTOFF = 0.75


@dataclass(frozen=True)
class NearMiss:
    """A query that found nothing, but whose words are close to terms the corpus is keyed by."""

    corrections: tuple[tuple[str, str], ...]  # (word of the query, the index term it is near)
    page: Page  # what the corrected query finds first


def near_miss(query: str, *, cutoff: float = NEAR_MISS_CUTOFF) -> NearMiss | None:
    """For a query with no hits: the page it would have found with its words spelt as the index
    spells them, or None (it has hits, or nothing is close). Reviewers use it to tell "the model
    searched for nonsense" from "the search was too strict for a reasonable query"."""
    if INDEX.search(query):
        return None
    terms: set[str] = set()
    corrections: list[tuple[str, str]] = []
    for raw in _TOKEN.findall(query.lower().replace(",", "")):
        if raw.isdigit():
            # Numbers are never fuzzed (a 4080 is not a near miss of a 4090), and a number the
            # index knew would have been a hit: the query names something the corpus lacks.
            return None
        if raw in STOPWORDS or len(raw) <= 3:  # short words match too much by ratio alone
            continue
        term = tokenize(raw)[0]
        close = difflib.get_close_matches(term, INDEX.vocabulary, n=1, cutoff=cutoff)
        if close:
            corrections.append((raw, close[0]))
            terms.add(close[0])
    hits = INDEX.rank(terms, limit=1) if terms else []
    return NearMiss(tuple(corrections), hits[0][1]) if hits else None


def format_hits(hits: list[tuple[float, Page]]) -> str:
    return "\n\n".join(
        f"{n}. {page.title}\n   {page.url}\n   {page.text}" for n, (_, page) in enumerate(hits, 1)
    )


class WebSearch(Tool):
    name: ClassVar[str] = "web_search"
    description: ClassVar[str] = (
        "Search the web. Returns up to 3 results, each with a title, URL and text snippet."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "The search query."}},
        "required": ["query"],
    }

    async def call(self, arguments: dict[str, Any]) -> str:
        query = arguments["query"]
        if not isinstance(query, str):
            raise ToolError('query must be a string, e.g. {"query": "rtx 5090 vram"}')
        hits = INDEX.search(query)
        if not hits:
            # Not an error (a real engine just finds nothing), but a recognisable string the
            # reviewer UI flags as a possible search_mismatch hazard.
            return f"{NO_MATCH_PREFIX} for {query!r}"
        return format_hits(hits)
