"""What an answer object holds, declared once: the graph's state uses these types, and
the CLI (``rag ask --json``), the server's output, the chat page and evaluation read
them. ``answer_schema()`` is the JSON schema of the answer object, published as
docs_corpus/answer.schema.json (a test keeps the two equal and validates real answers
against it).

They are ``TypedDict``s, not classes with behaviour: a server thread's state is
checkpointed and sent as JSON, and a dict of plain values survives both unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import TypedDict


class PassageRecord(TypedDict):
    """A passage the generator read (tools.retrieval.hybrid.Passage, as plain values)."""

    text: str
    source: str
    chunk_ids: list[str]
    score: float
    distance: float
    doc_id: str
    page: int | None
    start_line: int | None
    end_line: int | None
    heading: str
    kind: str


class Citation(TypedDict):
    """A passage the answer cites as ``[n]``, with where it is."""

    n: int
    source: str
    chunk_id: str
    chunk_ids: list[str]
    page: int | None
    start_line: int | None
    end_line: int | None
    heading: str
    snippet: str  # the passage's first characters


class Support(TypedDict):
    """A statement of the answer with the sentences of its cited passage it rests on
    (graph/checks/support.py)."""

    statement: str  # the statement, without its markers
    n: int  # the passage it cites, as the answer numbers it
    source: str
    page: int | None
    line: int | None  # the quote's first line in its file, when known
    quote: str  # the passage's own words


class StatementSupport(TypedDict):
    """One statement of an answer and the support the service found for it
    (graph/checks/support.py, ``statement_support``)."""

    statement: str  # the statement, without its markers
    cited: list[int]  # the passages the model cited for it: a hint, searched first
    facts: bool  # it says something the question did not (else it carries no fact)
    supported: bool  # every clause has a quote that states it
    found_by: list[str]  # what found the quotes: "text", "embedding", "verifier"
    quotes: list[Support]  # one per clause, from any passage the generator read


class Closest(TypedDict):
    """A passage's sentence nearest the question, shown when the documents do not say
    the answer (graph/checks/support.py, ``closest``)."""

    n: int  # the passage, in retrieval's order
    source: str
    page: int | None
    line: int | None
    quote: str


class Dropped(TypedDict):
    """A candidate passage that did not reach the generator, and the step that cut it."""

    chunk_id: str
    source: str
    location: str
    stage: str  # top_k, threshold, duplicate, rerank, evidence, ...
    reason: str
    score: float
    distance: float
    snippet: str


class EvidenceReport(TypedDict):
    units: int
    chars_read: int
    chars_retrieved: int


class RetrievalReport(TypedDict, total=False):
    """What retrieval found and cut for this question (its diagnosis)."""

    collection: str
    version: int | None  # the collection version answered from
    candidates: int
    over_threshold: int
    duplicates: int
    threshold: float
    closest_distance: float | None
    kept: int
    strategy: str
    dropped: list[Dropped]
    rerank_error: dict[str, str]  # the reranker failed: retrieval order was kept
    evidence: EvidenceReport
    evidence_error: str  # evidence selection failed: whole passages were read


class LiteralChoice(TypedDict):
    """The reading question (graph/checks/readings.py ``literal_choice``): the answer's
    literal left blank, the passages' literals of its kind as options."""

    literal: str
    options: list[str]
    shares: list[float]  # each option's share of the verifier's probability
    picked: str
    share: float  # the literal's own share
    rival: str
    overruled: bool  # it did not win by WIN_MARGIN


class OwnAnswer(TypedDict):
    """The verifier's own answer to the question, not shown the draft."""

    answer: str
    agrees: bool  # the draft states it
    found: bool
    sure: float | None  # its probability of its first word
    sure_enough: bool
    quoted: bool  # every statement quoted close: the own answer is a veto, not a need


class SecondOpinion(TypedDict, total=False):
    """A short answer asked again with the passages in reverse order."""

    answer: str
    agreement: float
    needed: float
    error: str


class ThresholdsUsed(TypedDict):
    """The verifier thresholds a verdict was read against (tools/verifier_thresholds.py)."""

    sentence: float
    phrase: float
    source: str  # where they come from: the settings, a calibration, or uncalibrated
    warning: str | None  # set when they were calibrated for another verifier


class CheckResult(TypedDict):
    """One check of graph/checks/pipeline.py's ``CHECKS`` that ran, in order."""

    check: str  # its name in CHECKS
    passed: bool
    # what it compared, in plain values: the facts an explanation names
    facts: dict[str, Any]


class Verdict(TypedDict, total=False):
    """The checks' verdict on an answer (graph/checks/pipeline.py)."""

    grounded: bool  # verified
    confidence: float | None  # what the threshold was compared with
    threshold: float
    statements: int
    cited: list[int]  # passage numbers cited
    unsupported: list[str]  # statements failing the literal checks
    missing: dict[str, list[str]]  # what each unsupported statement lacks
    citations: int
    citations_needed: int
    form: Literal["sentence", "phrase"]
    obeyed_passage: bool
    planted_words: list[str]
    confidence_method: str  # logprobs or sampled
    claim_confidence: float  # the yes before the reading question
    literal_choice: LiteralChoice | None
    own_answer: OwnAnswer
    copied: bool
    thresholds: ThresholdsUsed
    checked_by: str  # the verifier model
    second_opinion: SecondOpinion
    error: str  # the verifier failed: the answer is unchecked
    documents_say: bool  # some statement has quoted support (false: withheld as such)
    unnamed: list[str]  # what the question's ask names and no cited passage does
    statement_support: list[StatementSupport]  # each statement's support, as found
    one_answer: bool  # the question asks for exactly one literal (literal_choice may run)
    checks: list[CheckResult]


class ModelFault(TypedDict):
    type: str  # the error's kind (tools/errors.py): timeout, malformed_output, ...
    stage: str  # the node
    message: str


class GuardDecision(TypedDict, total=False):
    mode: str
    verdict: Literal["allowed", "off_topic", "blocked"]
    reason: str
    distance: float | None
    error: str


# verified: the checks confirmed it; not_verified: the documents state it (quoted) but
# the checks could not confirm it answers the question; not_in_documents: the documents
# do not say (no passage answers, or none states what the answer said); abstained: no
# answer for another reason (a failed step, a refused topic, an obeyed instruction).
Outcome = Literal["verified", "not_verified", "not_in_documents", "abstained"]

# What each outcome is called where it is shown (the CLI, the chat page, reports).
LABELS: dict[str, str] = {
    "verified": "VERIFIED",
    "not_verified": "NOT VERIFIED",
    "not_in_documents": "THE DOCUMENTS DO NOT SAY",
    "abstained": "ABSTAINED",
}


class Judgement(TypedDict):
    """The label on an answer, built once (graph/checks/judgement.py) from the checks'
    verdict and each statement's support; every surface renders it and none works it out
    again."""

    outcome: Outcome
    label: str  # LABELS[outcome]
    statements: list[StatementSupport]  # each statement and what states it
    unsupported: list[str]  # the fact-carrying statements nothing states
    reason: str | None  # why not verified (or why withheld), as a sentence
    # the draft that was withheld, with its markers; never shown as the answer (None when
    # the answer shown is the draft, or no draft was written)
    withheld: str | None


__all__ = [
    "LABELS",
    "CheckResult",
    "Citation",
    "Closest",
    "Dropped",
    "GuardDecision",
    "Judgement",
    "LiteralChoice",
    "ModelFault",
    "Outcome",
    "OwnAnswer",
    "PassageRecord",
    "RetrievalReport",
    "SecondOpinion",
    "StatementSupport",
    "Support",
    "ThresholdsUsed",
    "Verdict",
]
