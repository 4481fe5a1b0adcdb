"""JSONPath in ``${…}`` as Jayway json-path 2.4 reads it (Conductor's ParametersUtils, with
SUPPRESS_EXCEPTIONS): the examples of Jayway's README, on its "store" document, with the results
Jayway 2.4.0's jar gives for them (run with that option, the paths prefixed ``$.t.output``)."""

from __future__ import annotations

from typing import Any

import pytest
from baton import expressions as ex

BOOKS = [
    {"category": "reference", "author": "Nigel Rees", "title": "Sayings of the Century",
     "price": 8.95},
    {"category": "fiction", "author": "Evelyn Waugh", "title": "Sword of Honour", "price": 12.99},
    {"category": "fiction", "author": "Herman Melville", "title": "Moby Dick",
     "isbn": "0-553-21311-3", "price": 8.99},
    {"category": "fiction", "author": "J. R. R. Tolkien", "title": "The Lord of the Rings",
     "isbn": "0-395-19395-8", "price": 22.99},
]  # fmt: skip
STORE = {
    "store": {"book": BOOKS, "bicycle": {"color": "red", "price": 19.95}},
    "expensive": 10,
}
TITLES = [b["title"] for b in BOOKS]


def read(path: str, doc: Any = STORE) -> Any:
    scope = ex.Scope(workflow={"input": doc}, step_output=lambda _step: doc)
    return ex.resolve("${t.output" + path + "}", scope)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # Jayway README: "The authors of all books"
        (".store.book[*].author", [b["author"] for b in BOOKS]),
        # "All authors"
        ("..author", [b["author"] for b in BOOKS]),
        # "All things, both books and bicycles"
        (".store.*", [BOOKS, {"color": "red", "price": 19.95}]),
        # "The price of everything"
        (".store..price", [8.95, 12.99, 8.99, 22.99, 19.95]),
        # "The third book"
        ("..book[2]", [BOOKS[2]]),
        # "The second to last book"
        ("..book[-2]", [BOOKS[2]]),
        # "The first two books"
        ("..book[0,1]", BOOKS[:2]),
        # "All books from index 0 (inclusive) until index 2 (exclusive)"
        ("..book[:2]", BOOKS[:2]),
        # "All books from index 1 (inclusive) until index 2 (exclusive)"
        ("..book[1:2]", BOOKS[1:2]),
        # "Last two books"
        ("..book[-2:]", BOOKS[-2:]),
        # "Book number two from tail"
        ("..book[2:]", BOOKS[2:]),
        # "All books with an ISBN number"
        ("..book[?(@.isbn)]", BOOKS[2:]),
        # "All books in store cheaper than 10"
        (".store.book[?(@.price < 10)]", [BOOKS[0], BOOKS[2]]),
        # "The number of books": a function after an indefinite path applies to each match
        ("..book.length()", [4]),
        (".store.book.length()", 4),
        # wildcard over a list, then a key: the list of that key where present
        (".store.book[*].isbn", ["0-553-21311-3", "0-395-19395-8"]),
        # a definite path reaching nothing is null; an indefinite one is []
        (".store.book[9].title", None),
        (".store.book[-9]", None),
        (".store.book[*].nothing", []),
        ("..nothing", []),
        (".store.book[?(@.price > 100)]", []),
        # a negative index alone is definite: the value itself
        (".store.book[-1].title", TITLES[-1]),
        # a key union at the end is one object of the keys present (Jayway merges them)
        (".store.bicycle['color','price']", {"color": "red", "price": 19.95}),
        (".store.bicycle['color','none']", {"color": "red"}),
        (".store.book[*]['title','isbn']", [
            {k: b[k] for k in ("title", "isbn") if k in b} for b in BOOKS
        ]),
        # filters: and, or, not, parentheses, equality with text, in/nin, size, empty
        ("..book[?(@.price <= 10 && @.category == 'fiction')].title", ["Moby Dick"]),
        ("..book[?(@.price > 20 || @.category == \"reference\")].title",
         [TITLES[0], TITLES[3]]),
        ("..book[?(!(@.isbn))].title", TITLES[:2]),
        ("..book[?(@.author in ['Nigel Rees', 'Evelyn Waugh'])].title", TITLES[:2]),
        ("..book[?(@.category nin ['fiction'])].title", TITLES[:1]),
        ("..book[?(@.title size 9)].title", ["Moby Dick"]),
        ("..book[?(@.isbn empty false)].title", TITLES[2:]),
        ("..book[?(@.price == '8.99')].title", ["Moby Dick"]),  # Jayway: 8.99 == '8.99'
        ("..book[?(@.isbn != '0-553-21311-3')].title", [TITLES[0], TITLES[1], TITLES[3]]),
        # a function at the end applies to each match of an indefinite path: length() of
        # what has none is null; another function failing on one match gives [] (all as
        # Jayway 2.4 with SUPPRESS_EXCEPTIONS answers, checked against its jar)
        ("..book[?(@.isbn)].length()", [5, 5]),
        (".store.*.length()", [4, 2]),
        (".store.bicycle.*.length()", [None, None]),
        (".store.book[*].price.sum()", []),
        (".store.*.keys()", []),
        (".store.book[*].length()", [4, 4, 5, 5]),
        (".store.book[0].*", ["reference", "Nigel Rees", TITLES[0], 8.95]),
        (".store.book[?(@.nope != 1)].title", TITLES),
        (".store.book[?(@.price)].nope", []),
        (".store.book[0].nope.deeper", None),
        (".store.book[0,9].title", TITLES[:1]),
        (".store.bicycle[?(@.color == 'red')].price", [19.95]),
        (".store.book[?(@.price > 10)][0]", []),
    ],
)  # fmt: skip
def test_a_jsonpath_reads_as_jayway_documents(path: str, expected: Any) -> None:
    assert read(path) == expected


def test_recursive_descent_is_document_order_and_reaches_into_lists() -> None:
    doc = {"status": "A", "items": [{"status": "B", "sub": {"status": "C"}}, {"status": "D"}]}
    assert read("..status", doc) == ["A", "B", "C", "D"]
    assert read("..items[*].status", doc) == ["B", "D"]
    assert read("..[0].status", doc) == ["B"]


def test_the_conductor_kitchensink_paths_read_every_status() -> None:
    es = {
        "workflows": [
            {"workflowId": "w1", "status": "RUNNING"},
            {"workflowId": "w2", "status": "COMPLETED"},
        ]
    }
    assert read("..status", es) == ["RUNNING", "COMPLETED"]
    assert read("..workflowId", es) == ["w1", "w2"]


def test_inside_text_a_match_list_is_its_json() -> None:
    scope = ex.Scope(workflow={"input": STORE}, step_output=lambda _s: STORE)
    got = ex.resolve("cheap: ${workflow.input.store.book[?(@.price < 9)].author}", scope)
    assert got == 'cheap: ["Nigel Rees","Herman Melville"]'


def test_a_plain_path_is_still_plain() -> None:
    ref = ex.parse("t.output.a[0]['b'].c")
    assert ref.query is None
    assert ref.path == ("output", "a", 0, "b", "c")
    assert ex.parse("t.output.a[*].b").path == ("output", "a")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("t.output..", "'..' is followed by"),
        ("t.output[?(@.a =~ /x.*/)]", "regular expressions (=~) are not supported"),
        ("t.output[?(@.a == )]", "a value expected"),
        ("t.output[?(@.a > 1]", "is not closed"),
        ("t.output['a'", "'[' is not closed"),
        ("t.output[?($.a > 1)]", "only @ paths"),
        ("t.output[a]", "bad bracket"),
        ("t.output" + "[?(@" * 9 + ".a" + ")]" * 9, "nest at most 8"),
        ("t.output" + "[*].a" * 300, "at most 1000 characters"),
        ("t.status[*]", "a step reference reads"),
        ("loop.iteration[*]", "a loop's iteration is a number"),
    ],
)
def test_a_bad_jsonpath_is_refused_with_what_is_wrong(path: str, message: str) -> None:
    with pytest.raises(ex.ExpressionError, match=None) as e:
        ex.parse(path)
    assert message in str(e.value)


def test_descent_into_a_deep_document_is_bounded_and_does_not_recurse() -> None:
    deep: Any = {"x": 1}
    for _ in range(5_000):
        deep = {"a": deep}
    assert read("..x", deep) == []  # deeper than 256 levels: not reached, no RecursionError
    shallow = {"a": {"a": {"x": 1}}}
    assert read("..x", shallow) == [1]
