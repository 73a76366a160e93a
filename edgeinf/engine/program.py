"""Build the native Program of a `Plan`: weights packed once, steps bound to arena offsets."""

from __future__ import annotations

from .. import _C
from .plan import Plan

_OFFSET_KEYS = ("in_offset", "out_offset", "x_offset", "y_offset")


def build_program(plan: Plan, threads: int = 1) -> _C.EngineProgram:
    """The `edgeinf._C.EngineProgram` that runs ``plan``'s steps in one native call, on
    ``threads`` threads (the caller's and ``threads - 1`` workers that live as long as it).

    Raises:
        ValueError: a parameter the native side refuses (the plan should have caught it).
    """
    program = _C.EngineProgram(plan.arena_bytes, threads)
    for tensor, data in plan.constants:
        program.write(plan.offsets[tensor], data.reshape(-1).view("uint8"))
    for step in plan.steps:
        args = dict(step.args)
        for key in _OFFSET_KEYS:
            if key in args:
                args[key] = plan.offsets[args[key]]
        if step.method == "concat":
            args["parts"] = [(plan.offsets[t], n * plan.tensors[t].nbytes // max(plan.tensors[t].num_elements, 1))
                             for t, n in args["parts"]]  # fmt: skip
        getattr(program, step.method)(**args)
    return program
