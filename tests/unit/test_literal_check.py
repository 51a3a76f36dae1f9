"""The literal check of tools.text.missing_facts reads Markdown.

Fenced blocks and inline code spans are parsed as CommonMark does, and every literal is
compared as a whole token, so a near-verbatim copy of the docs passes while a wrong flag,
setting, path or number does not.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from graph.checks.citations import citation_problems
from graph.checks.repairs import cite_holders, cite_uncited, recite_best
from tools.text import blank_out, missing_facts, swappable_literals

FAST = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)

PASSAGES = """## Creating a collection

Run `rag ingest` with a collection name:

```bash
rag ingest --collection handbook docs_corpus/
```

This command creates the collection `handbook` and stores it under `~/.cache/agentic-rag`.
Set `RAG_K` (default 5) to change how many passages are retrieved; `RAG_K_MAX` caps it
at 1,000. Pass `-k 4` or `--keep` on the command line. The model page,
`docs_corpus/models.md`, shows `openai:gpt-4o-mini@http://127.0.0.1:8000/v1` with
`llm_threads=1`. Traces go to Langfuse.
"""

# a near-verbatim copy: the prose between the code spans is reworded and rewrapped
COPY = """Run `rag ingest` with a collection name [1]:
```bash
rag ingest --collection handbook docs_corpus/
```
This creates the collection `handbook`, stored in `~/.cache/agentic-rag/` [1]."""


def test_near_verbatim_copy_with_a_fenced_block_is_accepted():
    assert missing_facts(COPY, PASSAGES) == []


@pytest.mark.parametrize(
    ("statement", "missing"),
    [
        ("Run `rag ingest --collections handbook`.", ["--collections"]),  # wrong flag
        ("Set `RAG_TOP_K` to 5.", ["RAG_TOP_K"]),  # wrong setting, in code
        ("Then set RAG_TOP_K to 5.", ["RAG_TOP_K"]),  # and in prose
        ("It caps at 450 passages.", ["450"]),  # wrong number
        ("The default is 50.", ["50"]),
        ("Read `docs_corpus/model.md`.", ["docs_corpus/model.md"]),  # wrong path
        ("It is under `~/.cache/agentic_rag`.", ["~/.cache/agentic_rag"]),
        ("Use `llm_threads=4`.", ["llm_threads=4"]),  # wrong value of a setting
        (
            "Use `openai:gpt-4o-mini@http://127.0.0.1:8001/v1`.",
            ["openai:gpt-4o-mini@http://127.0.0.1:8001/v1"],
        ),
        (
            "Use `openai:gpt-4o@http://127.0.0.1:8000/v1`.",
            ["openai:gpt-4o@http://127.0.0.1:8000/v1"],
        ),
        ("Traces go to Langsmith.", ["Langsmith"]),  # a wrong name in prose
    ],
)
def test_wrong_literal_is_caught(statement, missing):
    assert missing_facts(statement, PASSAGES) == missing


@pytest.mark.parametrize(
    ("statement", "context", "missing"),
    [
        ("Set `RAG_K`.", "Set RAG_K=5 (at most RAG_K_MAX).", []),
        ("Set `RAG_K`.", "Set RAG_K_MAX.", ["RAG_K"]),
        ("Pass `--k`.", "Pass --keep.", ["--k"]),
        ("Pass `-k`.", "Pass --k.", ["-k"]),
        ("Pass `-k 4`.", "Pass -k 4.", []),
        ("It caps at 45.", "It caps at 450, or 4.45.", ["45"]),
        ("It caps at 45.", "It caps at 40-45.", []),
        ("Use `gpt-4o`.", "Use gpt-4o-mini.", ["gpt-4o"]),
        ("Read `docs_corpus`.", "Read docs_corpus/models.md.", []),
        ("Read `docs_corpus/models`.", "Read docs_corpus/models.md.", ["docs_corpus/models"]),
    ],
)
def test_a_literal_is_found_only_as_a_whole_token(statement, context, missing):
    assert missing_facts(statement, context) == missing


def test_comparison_ignores_case_thousands_separators_and_markers():
    context = "Set rag_k to 1000 with --Collection, see docs_corpus/Models.md."
    statement = "Set `RAG_K` to 1,000 with `--collection` [2], see `docs_corpus/models.md`."
    assert missing_facts(statement, context) == []


def test_inline_code_may_hold_a_shorter_backtick_run():
    # three backticks open the span, so the run of two inside is code, not a delimiter
    context = "Quote a setting as ``RAG_K`` in reStructuredText."
    assert missing_facts("Write ``` ``RAG_K`` ``` to quote a setting.", context) == []
    assert missing_facts("Write ``` ``RAG_KEY`` ``` to quote it.", context) == ["RAG_KEY"]


def test_unmatched_backticks_are_literal_text():
    # the run of two has no partner, so `RAG_K` is the only span and the prose stays prose
    assert missing_facts("Wrap it in `` when `RAG_K` is set to anything.", PASSAGES) == []


def test_unterminated_fence_is_code_to_the_end():
    truncated = "Run:\n\n```bash\nrag ingest --collection handbook docs_corpus/"
    assert missing_facts(truncated, PASSAGES) == []
    wrong = "Run:\n\n~~~ sh\nrag ingest --collections handbook\nthen rag ask"
    assert missing_facts(wrong, PASSAGES) == ["--collections", "then", "ask"]


@pytest.mark.parametrize(("outer", "inner"), [("````", "```"), ("~~~", "```"), ("```", "```bash")])
def test_a_fence_closes_only_with_its_own_character_and_length(outer, inner):
    # the inner line is code: a shorter run, another character or an info string closes nothing
    statement = f"{outer}markdown\n{inner}\nrag ingest --collections handbook\n{outer}"
    assert missing_facts(statement, PASSAGES) == ["--collections"]


def test_prose_first_word_and_words_after_a_fence_are_not_names():
    statement = "Afterwards run:\n```\nrag ingest\n```\nMeanwhile nothing else changes."
    assert missing_facts(statement, PASSAGES) == []


def test_a_literal_opening_the_answer_is_still_a_literal():
    # Knot test half: "NOT_AUTH rcode is returned" passed, where the passage says NOTAUTH
    passage = "If the address does not fall into any of the ranges, NOTAUTH rcode is returned."
    assert missing_facts("NOT_AUTH rcode is returned.", passage) == ["NOT_AUTH"]
    assert missing_facts("NOTAUTH rcode is returned.", passage) == []
    assert missing_facts("If the address does not fall into any range, it is.", passage) == []


# --- properties on generated Markdown ----------------------------------------------------

CODE_WORDS = st.one_of(
    st.sampled_from(
        [
            "rag",
            "ingest",
            "--collection",
            "-k",
            "--keep",
            "RAG_K=5",
            "RAG_K_MAX",
            "llm_threads=1",
            "docs_corpus/models.md",
            "~/.cache/agentic-rag",
            "openai:gpt-4o-mini@http://127.0.0.1:8000/v1",
            "1,000",
            "3.14",
            "450",
            '"X-API-Key:',
            "$RAG_API_KEY",
            'print(result["answer"])',
            "{",
            "}",
            "|",
            "#",
            "a.b",
            "x-y",
            ".",
        ]
    ),
    st.text(alphabet="abcdefghijkl_-./:=0123456789ÄéΣ", min_size=1, max_size=8),
)
PROSE_WORDS = st.one_of(
    st.sampled_from(
        [
            *("This", "command", "creates", "the", "Langfuse", "RAG_K", "5", "4.5", "1,000"),
            *("45", ".", ",", "(", ")", "e.g.", "10-20", "x-Ray", "vLLM", "-", "````"),
        ]  # "````": a stray run, longer than any span's
    ),
    st.text(alphabet="abcdefghijklABCD_-.,:0123456789ÄéΣ'\"()", min_size=1, max_size=8),
)
STARTERS = st.sampled_from(["This", "Run", "Set", "the", "Use", "1."])


@st.composite
def span(draw) -> tuple[int, list[str]]:
    """An inline code span: its delimiter length and words, perhaps shorter/longer runs."""
    ticks = draw(st.integers(1, 3))
    inner = st.sampled_from(["`" * n for n in (1, 2, 3) if n != ticks])
    return ticks, draw(st.lists(st.one_of(CODE_WORDS, inner), min_size=1, max_size=5))


@st.composite
def block(draw, last: bool) -> tuple:
    """A prose line (words, spans, stray backticks) or a fenced block (maybe unterminated)."""
    if draw(st.booleans()):
        items = draw(st.lists(st.one_of(PROSE_WORDS, span()), max_size=8))
        return ("prose", draw(STARTERS), items)
    char = draw(st.sampled_from("`~"))
    length = draw(st.integers(3, 5))
    info = draw(st.sampled_from(["", "bash", " python", "toml {x}"]))
    lines = draw(st.lists(st.lists(CODE_WORDS, min_size=1, max_size=5), max_size=4))
    closed = not last or draw(st.booleans())
    return ("fence", char * length, info, lines, closed, draw(st.integers(0, 1)))


@st.composite
def markdown(draw) -> list[tuple]:
    count = draw(st.integers(1, 5))
    return [draw(block(last=i == count - 1)) for i in range(count)]


def render_span(ticks: int, words: list[str], fresh: str | None = None) -> str:
    return "`" * ticks + " " + " ".join(words + ([fresh] if fresh else [])) + " " + "`" * ticks


def render(blk: tuple, fresh: str | None = None) -> list[str]:
    """The block's lines; ``fresh`` goes into its first code span or fenced block."""
    if blk[0] == "prose":
        _, starter, items = blk
        words = [starter]
        for item in items:
            if isinstance(item, tuple):
                words.append(render_span(*item, fresh))
                fresh = None
            else:
                words.append(item)
        return [" ".join(words)]
    _, fence, info, lines, closed, longer = blk
    body = ([fresh] if fresh else []) + [" ".join(line) for line in lines]
    return [fence + info, *body] + ([fence + fence[0] * longer] if closed else [])


def has_code(blk: tuple) -> bool:
    return blk[0] == "fence" or any(isinstance(item, tuple) for item in blk[2])


@FAST
@given(doc=markdown(), data=st.data())
def test_whole_lines_of_the_context_have_no_missing_facts(doc, data):
    lines = [line for blk in doc for line in render(blk)]
    start = data.draw(st.integers(0, len(lines) - 1))
    end = data.draw(st.integers(start + 1, len(lines)))
    assert missing_facts("\n".join(lines[start:end]), "\n".join(lines)) == []


@FAST
@given(doc=markdown(), data=st.data(), fresh=st.from_regex(r"zq[a-z0-9_]{2,8}", fullmatch=True))
def test_a_fresh_token_in_code_is_reported(doc, data, fresh):
    coded = [i for i, blk in enumerate(doc) if has_code(blk)]
    assume(coded)
    where = data.draw(st.sampled_from(coded))
    start = data.draw(st.integers(0, where))
    end = data.draw(st.integers(where + 1, len(doc)))
    context = "\n".join(line for blk in doc for line in render(blk))
    assume(fresh not in context.lower())
    statement = "\n".join(
        line for i in range(start, end) for line in render(doc[i], fresh if i == where else None)
    )
    assert missing_facts(statement, context) == [fresh]


@FAST
@given(
    spans=st.lists(span(), min_size=2, max_size=5),
    prose=st.lists(st.text(alphabet="abcdefghij ,;", min_size=1, max_size=20), min_size=2),
)
def test_prose_between_code_spans_is_not_a_literal(spans, prose):
    context = "\n".join(render_span(*s) for s in spans)
    statement = "It says " + " ".join(
        f"{render_span(*s)} {words}" for s, words in zip(spans, prose, strict=False)
    )
    assert missing_facts(statement, context) == []


@FAST
@given(
    token=st.sampled_from(["RAG_K", "--k", "docs_corpus/models", "gpt-4o", "45", "llm_threads=1"]),
    suffix=st.sampled_from(["_MAX", "s", "0", "eep", "-mini", ".md", "2"]),
    doc=markdown(),
)
def test_a_token_extended_by_word_characters_is_reported(token, suffix, doc):
    context = "\n".join(line for blk in doc for line in render(blk)) + f"\nSet `{token}` here."
    longer = token + suffix
    assume(longer.lower() not in context.lower())
    assert missing_facts(f"Set `{longer}` here.", context) == [longer]


def test_a_code_span_must_occur_as_written_not_as_scattered_words():
    context = "Install with `make demo`. Nothing else is needed to install it."
    assert missing_facts("Run `make install` [1].", context) == ["make install"]
    assert missing_facts("Run `make demo` [1].", context) == []
    assert missing_facts("Run `make   DEMO` [1].", context) == []  # spacing and case


def test_statements_are_not_cut_inside_code_or_after_eg():
    from tools.text import statements

    answer = (
        "Rebuild with `rag ingest PATH... --rebuild` [1]. Set `k`, e.g. `k = 3` [2]. "
        "Then ask again."
    )
    assert statements(answer) == [
        "Rebuild with `rag ingest PATH... --rebuild` [1].",
        "Set `k`, e.g. `k = 3` [2].",
        "Then ask again.",
    ]


def test_a_fenced_block_closes_the_statement_that_shows_it():
    """The text after a block says something else: read with it as one statement, a
    sentence of framing and a sentence of facts had to be found in one quote."""
    from tools.text import statements

    answer = "Run this:\n\n```bash\nmake demo. Then\n```\n[1] It ingests the docs [2]."
    assert statements(answer) == [
        "Run this:\n\n```bash\nmake demo. Then\n```\n[1]",
        "It ingests the docs [2].",
    ]


IMMUNE = [
    "The innate immune system reacts within hours.",
    "The adaptive immune system, by contrast, remembers a pathogen for years.",
]


@pytest.mark.parametrize(
    ("answer", "recited"),
    [
        ("adaptive immune system [1]", "adaptive immune system [2]"),  # [2] holds it
        ("Adaptive  immune system. [1][3]", "Adaptive  immune system. [2]"),  # [3]: none
        ("innate immune system [1]", "innate immune system [1]"),  # already right
        ("the immune system [2]", "the immune system [2]"),  # no passage holds it: kept
        ("within hours [2], for years [2]", "within hours [1], for years [2]"),
        ("no marker at all", "no marker at all"),
    ],
)
def test_a_quote_is_cited_to_the_first_passage_that_holds_it(answer, recited):
    assert cite_holders(answer, IMMUNE) == recited


def test_swappable_literals_are_code_spans_fenced_lines_and_prose_numbers():
    text = "Run `rag serve` [2] on port 8123, not `rag ui` [1].\n\n```bash\nrag ingest x\n```"
    assert swappable_literals(text) == ["rag ingest x", "rag serve", "rag ui", "8123"]
    assert swappable_literals("Between `a` two spans `b`.") == ["a", "b"]
    assert swappable_literals("Use `rag ask\n--thread ID`.") == ["rag ask --thread ID"]


def test_the_literals_prose_names_without_backticks():
    text = (
        "Use the PRAGMA table_info command, or MATCH FULL; set gc.pruneExpire, pass -x or "
        "--cruft, see the pre-auto-gc hook and xProgress in AsyncLocalStorage under /tmp/x. "
        "but not e.g. plain words, non-zero, and/or a."
    )
    assert swappable_literals(text) == []  # the reading question's options: code and numbers
    assert missing_facts(text, "nothing here") == [
        "PRAGMA",
        "MATCH",
        "FULL",
        "AsyncLocalStorage",
        "table_info",
        "gc.pruneExpire",
        "-x",
        "--cruft",
        "pre-auto-gc",
        "xProgress",
        "/tmp/x",
    ]


def test_blank_out_takes_the_whole_code_span_or_a_whole_number():
    assert blank_out("Use `--as-of 2` [1].", "--as-of 2") == "Use ___ [1]."
    assert blank_out("Use `--as-of\n2` [1].", "--as-of 2") == "Use ___ [1]."
    assert blank_out("Keep 1 [1] of 10.", "1") == "Keep ___ [1] of 10."
    assert blank_out("[1] keeps 110 and 1.", "1") == "[1] keeps 110 and ___."


def test_a_name_the_question_gave_need_not_be_in_the_cited_passage():
    passage = [{"text": "It runs on a single GPU with 16 GB of memory."}]
    question = "What hardware does Lamini need?"
    asked = citation_problems("So Lamini runs on a single GPU [1].", passage, question=question)
    assert asked.unsupported == []
    # but not a name the question did not give, nor a number the question gave
    other = citation_problems("So Llama runs on a single GPU [1].", passage, question=question)
    assert other.missing == {"So Llama runs on a single GPU [1].": ["Llama"]}
    number = citation_problems(
        "It needs 32 GB [1].", passage, question="Does it need 32 GB of memory?"
    )
    assert number.missing == {"It needs 32 GB [1].": ["32"]}
    # a product the question names in lower case, in a command; an option is never given
    lock = [{"text": "Use `worktree lock` to keep it."}]
    asked = "How do I stop git from pruning it with --force?"
    assert citation_problems("Run `git worktree lock` [1].", lock, question=asked).missing == {}
    assert citation_problems("Run `worktree lock --force` [1].", lock, question=asked).missing
    # a function or module the question names is given too (CMake's add_test() page says
    # "the build directory" without repeating its own title); a path is not
    build = [{"text": "If not specified, the test runs in the current binary directory."}]
    asked = "In which directory does a test from add_test() run on Node.js?"
    said = "A test from `add_test()` on Node.js runs in the binary directory [1]."
    assert citation_problems(said, build, question=asked).missing == {}
    path = citation_problems("It runs in /tmp [1].", build, question="Is it /tmp?")
    assert path.missing == {"It runs in /tmp [1].": ["/tmp"]}
    # a hyphenated word the question gave too: the answer restating the question's setup
    dial = [{"text": "Set defer_transports = smtp to stop spontaneous deliveries."}]
    asked = "On a dial-on-demand line, which setting stops spontaneous deliveries?"
    said = "On a dial-on-demand line, defer_transports stops them [1]."
    assert citation_problems(said, dial, question=asked).missing == {}


def test_words_in_quotation_marks_must_be_in_the_passage_as_written():
    # Postfix's postscreen page: the 1.5B generator named a setting that does not exist
    passage = "Use postscreen_allowlist_interfaces to deny the temporary allowlist on a backup MX."
    made_up = 'It is the "deny temporary allowlist on backup MX" setting [1].'
    assert missing_facts(made_up, passage) == ["deny temporary allowlist on backup MX"]
    # quoted as the passage writes it, across a line break and in curly quotes: found
    error = "the error: file is\nencrypted or is not a database."
    assert missing_facts('It says "file is encrypted or is not a database" [1].', error) == []
    assert missing_facts("It prints \u201cfile is encrypted\u201d [1].", error) == []


def test_an_answer_citing_nothing_is_cited_to_the_passage_holding_each_statement():
    passages = [
        "Set `tracing` to `local` to keep spans in a file.",
        "Run `rag trace show TRACE_ID` to see the trace of an answer.",
    ]
    answer = "Use `rag trace show TRACE_ID` to see the trace. Set `tracing` to `local` first."
    assert cite_uncited(answer, passages) == (
        "Use `rag trace show TRACE_ID` to see the trace. [2] Set `tracing` to `local` first. [1]"
    )
    # a statement no passage holds stays uncited; in a cited answer, only what cites nothing
    # (a paragraph's last statements after its last marker) is cited
    assert cite_uncited("Run `rag trace list`.", passages) == "Run `rag trace list`."
    assert (
        cite_uncited("Run it [2]. Then `tracing`.", passages) == "Run it [2]. Then `tracing`. [1]"
    )
    assert cite_uncited("Set `tracing`. Run it [2].", passages) == "Set `tracing`. Run it [2]."


def test_a_clause_cited_to_a_passage_saying_less_of_it_is_recited_to_the_one_saying_it():
    extname = (  # Node.js 18's path.html, the passage the 1.5B generator cited
        "If there is no . in the last portion of the path, or if there are no . characters "
        "other than the first character of the basename of path, an empty string is returned."
    )
    absolute = (
        "The path.isAbsolute() method determines if path is an absolute path. If the given "
        "path is a zero-length string, false will be returned."
    )
    slipped = "The path.isAbsolute() method returns false for an empty string [1]."
    assert recite_best(slipped, [extname, absolute]).endswith("string [2].")
    # a passage sharing only a word more is no reason to move a citation
    assert recite_best("An empty string is returned [1].", [extname, absolute]).endswith("[1].")
    # nor one that lacks a literal of the clause
    lacking = "The path.isAbsolute() method returns 7 for an empty string [1]."
    assert recite_best(lacking, [extname, absolute]).endswith("[1].")


def test_a_clause_its_cited_passage_lacks_a_literal_of_is_recited_to_the_one_holding_all():
    # PostgreSQL's wal-configuration page: the generator cited the passage saying more of
    # its words, and took the value from its neighbour
    default = (
        "Although checkpoint_completion_target could be set as high as 1.0, it is "
        "typically recommended to set it to no higher than 0.9 (the default)."
    )
    period = "Out of the box, the period is set by checkpoint_completion_target."
    slipped = "Out of the box, checkpoint_completion_target is set to 0.9 [2]."
    assert recite_best(slipped, [default, period]).endswith("0.9 [1].")
    # a value no passage holds keeps its citation, and fails the literal check
    assert recite_best("It is set to 0.5 [2].", [default, period]).endswith("[2].")


def test_literals_named_in_prose_must_be_in_the_passage_too():
    # Node.js, permission model: the answer named a path the cited passage never gave
    policy = "Create the policy file as a different user id than the one running Node.js."
    said = "To read files only under /tmp, create the policy file as another user [1]."
    assert missing_facts(said, policy) == ["/tmp"]
    flags = "Pass --experimental-policy with the manifest; PRAGMA index_info lists columns."
    assert missing_facts("Pass --allow-fs-read to node [1].", flags) == ["--allow-fs-read"]
    assert missing_facts("Use PRAGMA table_info [1].", flags) == ["table_info"]
    # found as written, whatever the case; plain words and "and/or" are no literals
    assert missing_facts("Pass --Experimental-Policy and/or PRAGMA INDEX_INFO [1].", flags) == []


def test_a_determiner_glued_to_a_file_suffix_is_not_a_dotted_name():
    # Python 3.11's zipapp.html; the 1.5B generator wrote "the.pyz" for "the .pyz"
    zipapp = "The archive is written with a .pyz extension; run it with python myapp.pyz."
    assert missing_facts("Give the.pyz file to the interpreter [1].", zipapp) == []
    assert missing_facts("Put a.netrc file in your home [1].", "no such file here") == []
    # a dotted name is still one, and so is a JavaScript `this.` in prose
    assert missing_facts("Call zipapp.create_archive [1].", zipapp) == ["zipapp.create_archive"]
    assert missing_facts("Read this.server [1].", zipapp) == ["this.server"]


def test_a_quantity_in_words_is_found_abbreviated_with_the_same_number_and_unit():
    # Exim's retry chapter: "It cannot be set greater than 24h, which is its default value."
    retry = "It cannot be set greater than 24h, which is its default value; 50M for size."
    assert missing_facts("The largest interval is 24 hours [1][2].", retry) == []
    assert missing_facts("Messages up to 50 megabytes are accepted [1].", retry) == []
    # another number, or a unit the passage does not abbreviate after it, is still news
    assert missing_facts("The largest interval is 12 hours [1].", retry) == ["12"]
    assert missing_facts("The largest interval is 24 days [1].", retry) == ["24"]
    assert missing_facts("Messages up to 50 minutes [1].", retry) == ["50"]


def test_a_name_is_found_where_the_passage_qualifies_it_with_its_module():
    # Python's graphlib.html defines "exception graphlib.CycleError"
    graphlib = "exception graphlib.CycleError Subclass of ValueError raised by prepare()."
    assert missing_facts("Catch CycleError [1].", graphlib) == []
    # the qualified name must end there, and a number after a dot is a decimal's fraction
    assert missing_facts("Catch Cycle [1].", graphlib) == ["Cycle"]
    assert missing_facts("Catch CycleErrors [1].", graphlib) == ["CycleErrors"]
    assert missing_facts("The ratio is 45 [1].", "The ratio is 4.45.") == ["45"]


def test_a_numbered_list_is_checked_by_its_items_not_their_numbers():
    """ "1. Navigate to ..." is one statement, and its number and the word after it are
    layout: a right list answer was refused for the literal "1" (slow install test)."""
    from tools.text import statements

    answer = "Follow these steps: [1]\n\n1. Navigate to the root. [1]\n2. Run `make demo`. [1]"
    items = "1. Navigate to the root. [1]\n2. Run `make demo`. [1]"
    assert statements(items) == ["1. Navigate to the root. [1]", "2. Run `make demo`. [1]"]
    passage = [{"text": "Go to the root and run make demo to install."}]
    assert citation_problems(answer, passage).unsupported == []
    assert missing_facts("1. Set RAG_K to 4.", "RAG_K is 5") == ["4"]  # a fact still counts


def test_a_compound_name_is_named_by_a_heading_that_spells_it_out():
    from tools.text import qualifiers_missing

    question = "Which DefaultServlet parameter makes the listing sorted?"
    heading = "Apache Tomcat 10 > Default Servlet Reference > What can I change?\n"
    assert qualifiers_missing(question, heading + "sortListings sorts the listing") == []
    assert qualifiers_missing(question, "sortListings sorts the listing") == ["DefaultServlet"]
    # the words must come in order and as whole words: other words between, or a longer
    # word, do not name it
    assert qualifiers_missing(question, "the default JSP servlet") == ["DefaultServlet"]
    assert qualifiers_missing(question, "DefaultServletX") == ["DefaultServlet"]
    # a name of one part is still looked for as itself: PUT is not in "output"
    assert qualifiers_missing("Which parameter rejects PUT?", "output rejected") == ["PUT"]
