"""bench/label_stability.py: the perturbations of issue 70 item 5 and the agreement."""

from __future__ import annotations

import json

from bench.label_stability import ADDED, add_sentence, agreement, shifted


def test_citations_move_to_the_neighbouring_passage():
    assert shifted("A [1]. B [2][3].", 3) == "A [2]. B [3][2]."
    assert shifted("A [1].", 1) == "A [1]."


def test_one_sentence_is_added_to_each_answer_page(tmp_path):
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "a.md").write_text("# A\n\nFirst.\n\nSecond.\n")
    (pages / "b.md").write_text("# B\n")
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "?", "source": "a.md"}) + "\n")
    assert add_sentence(pages, tmp_path / "out", questions) == ["a.md"]
    assert (tmp_path / "out" / "a.md").read_text() == f"# A\n\n{ADDED}\n\nFirst.\n\nSecond.\n"
    assert (tmp_path / "out" / "b.md").read_text() == "# B\n"


def test_agreement_counts_the_same_outcomes_and_leaves_errors_apart(tmp_path):
    def run(name, outcomes):
        folder = tmp_path / name
        folder.mkdir()
        rows = [
            {"id": i, "error": "x"} if o == "error" else {"id": i, "outcome": o}
            for i, o in outcomes.items()
        ]
        (folder / "answers.items.jsonl").write_text("\n".join(map(json.dumps, rows)))
        return folder

    plain = run("plain", {"q1": "verified", "q2": "not_verified", "q3": "verified"})
    moved = run("moved", {"q1": "verified", "q2": "not_in_documents", "q3": "error"})
    result = agreement(plain, moved)
    assert (result["compared"], result["same"], result["agreement"]) == (2, 1, 0.5)
    assert result["not_comparable"] == ["q3"]
    assert result["changed"] == {"q2": "not_verified -> not_in_documents"}
