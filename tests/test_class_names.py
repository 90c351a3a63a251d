"""Classes that were defined twice or three times under one name now have one definition each: the name says
what the class is (a collective's rank group is a CollectiveGroup, a planner's op a StepOp)."""
import ast
import collections
import pathlib

PKG = pathlib.Path(__file__).parents[1] / "src" / "trnsim"
ONCE = {"ShapeError", "Cluster", "Placement", "Group", "Op"}


def test_each_name_is_defined_once():
    where = collections.defaultdict(list)
    for path in PKG.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and node.name in ONCE:
                where[node.name].append(path.relative_to(PKG).as_posix())
    assert {n: w for n, w in where.items() if len(w) > 1} == {}
    assert set(where) == ONCE  # each still exists once


def test_earlier_public_names_still_import():
    from trnsim import fabric, plan
    from trnsim.core import customop

    assert fabric.ShapeError is fabric.CollectiveShapeError and fabric.Placement is fabric.RankLocation
    assert plan.Op is plan.StepOp and customop.Op is customop.CustomOp
