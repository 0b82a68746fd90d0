"""ksqlDB's lambda functions evaluated by Spark (issue 30): the Spark SQL that ``translate``
makes of TRANSFORM, FILTER and REDUCE over arrays and maps (and of STRUCT constructors of
different fields mixed in one array) runs in the shared session over a few
rows (nulls, a map whose new keys repeat, nested lambdas) and each result equals a plain-Python
oracle of ksqlDB's UDFs (``udf/lambda``: a null collection gives null, REDUCE the initial state,
a map TRANSFORM with repeated keys null). One batch query: no streaming needed to check what
the expressions compute; the engine's unit tests check that queries use this translation."""
from __future__ import annotations

from typing import Any, Callable

from kafkalite.sql import ast
from kafkalite.sql.parser import parse
from kafkalite.sql.translate import Columns, quote, to_spark

T = ast.SqlType
TYPES = {"NUMS": T("ARRAY", items=(T("INT"),)), "M": T("MAP", items=(T("STRING"), T("BIGINT"))),
         "WORDS": T("ARRAY", items=(T("STRING"),))}
ROWS = [([1, 2, 3, 4], {"a": 1, "bb": 5}, ["x", "y"]),
        (None, None, None),
        ([], {}, []),
        ([7], {"a": 2, "A": 3}, ["z"])]          # upper-casing its keys repeats one

Oracle = Callable[[Any, Any, Any], Any]


def _map_or_null(pairs: list[tuple[Any, Any]]) -> dict[Any, Any] | None:
    """ksqlDB's Collectors.toMap: a repeated key fails the call (the column is null)."""
    keys = [k for k, _ in pairs]
    return None if len(set(keys)) != len(keys) else dict(pairs)


CASES: list[tuple[str, Oracle]] = [
    ("TRANSFORM(nums, x => x * 10)", lambda n, m, w: None if n is None else [x * 10 for x in n]),
    ("FILTER(nums, x => x % 2 = 0)", lambda n, m, w: None if n is None else [x for x in n if x % 2 == 0]),
    ("REDUCE(nums, 0, (s, x) => s + x)", lambda n, m, w: 0 if n is None else sum(n)),
    ("REDUCE(nums, CAST(NULL AS INT), (s, x) => s + x)", lambda n, m, w: None),
    ("FILTER(m, (k, v) => v > 1)", lambda n, m, w: None if m is None else {k: v for k, v in m.items() if v > 1}),
    ("TRANSFORM(m, (k, v) => UCASE(k), (k, v) => v + 1)",
     lambda n, m, w: None if m is None else _map_or_null([(k.upper(), v + 1) for k, v in m.items()])),
    ("TRANSFORM(m, (k, v) => CONCAT(k, '!'), (k, v) => LEN(k) * v)",
     lambda n, m, w: None if m is None else {k + "!": len(k) * v for k, v in m.items()}),
    ("REDUCE(m, CAST(0 AS BIGINT), (s, k, v) => s + v * LEN(k))",
     lambda n, m, w: 0 if m is None else sum(v * len(k) for k, v in m.items())),
    ("TRANSFORM(nums, x => TRANSFORM(words, y => CONCAT(y, CAST(x AS STRING))))",
     lambda n, m, w: None if n is None else [None if w is None else [y + str(x) for y in w] for x in n]),
    # STRUCT constructors of different fields: the union of their fields, the missing ones null
    ("ARRAY[STRUCT(a := ARRAY_LENGTH(nums)), STRUCT(b := 'x', a := 2)]",
     lambda n, m, w: [(None if n is None else len(n), None), (2, "x")]),
    ("TRANSFORM(words, y => STRUCT(w := y))", lambda n, m, w: None if w is None else [(y,) for y in w]),
    ("ARRAY_LENGTH(FILTER(words, w => w != 'y'))", lambda n, m, w: None if w is None else len([x for x in w
                                                                                               if x != "y"])),
]


def test_lambda_functions_compute_what_ksqldb_computes(spark: Any) -> None:
    from pyspark.sql.types import ArrayType, IntegerType, LongType, MapType, StringType, StructField, StructType

    schema = StructType([StructField("NUMS", ArrayType(IntegerType())),
                         StructField("M", MapType(StringType(), LongType())),
                         StructField("WORDS", ArrayType(StringType()))])
    spark.createDataFrame(ROWS, schema).createOrReplaceTempView("lambda_rows")
    scope = Columns(set(TYPES), TYPES)
    items = []
    for index, (text, _) in enumerate(CASES):
        e = parse(f"SELECT {text} FROM s EMIT CHANGES;")[0].statement.query.items[0].expr  # type: ignore
        items.append(f"{to_spark(e, scope, text)} AS {quote(f'C{index}')}")
    got = spark.sql(f"SELECT {', '.join(items)} FROM lambda_rows").collect()
    assert len(got) == len(ROWS)
    for row, (nums, m, words) in zip(got, ROWS):
        for index, (text, oracle) in enumerate(CASES):
            value = row[f"C{index}"]
            assert value == oracle(nums, m, words), (text, nums, m, words, value)
