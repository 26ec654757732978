"""One registry of diversity methods: a name selects a pure function and says where it enters the RL step.

Entry points:

* ``"reward"``: ``fn(batch, **params) -> (B, G)`` new rewards, used in place of ``batch.rewards`` before the group
  normalisation;
* ``"advantage"``: ``fn(batch, advantages, **params) -> (B, G)`` final advantages, given the base (normalised)
  advantages; the method adds to them or replaces them;
* ``"loss"``: ``fn(batch, **params) -> ()`` a scalar term the engine adds to the policy loss.

A method may name the parameter that scales its term linearly (``scale``: A = A_bar + scale * u, SetPO's lambda):
the engines' experiment controls (target ratio, warm-up, placebo; `setpo.core.controls`) set that weight, and a
zero weight without a target ratio switches the method off. ``min_group`` is the fewest rows of a group the method
acts on (SetPO: 3); rows of smaller groups keep A_bar.

A registered name cannot be overwritten, so ``get_method(name)`` always returns the function registered under it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from setpo._validate import check_choice, check_int, check_known, check_str
from setpo.methods.batch import INPUT_FIELDS, GroupBatch, check_group_tensor

Entry = Literal["reward", "advantage", "loss"]
#: The group normalisation a reward method expects after it: "group" (GRPO's z-score), "none" (centre only).
GroupScale = Literal["group", "none"]
ENTRIES = ("reward", "advantage", "loss")


@dataclass(frozen=True, eq=False)
class Method:
    """A registered method: its function, entry point, inputs, defaults and citation."""

    name: str
    entry: Entry
    fn: Callable[..., torch.Tensor]
    needs: frozenset[str]
    citation: str
    formula: str
    defaults: Mapping[str, Any] = field(default_factory=dict)
    group_scale: GroupScale | None = None
    needs_for: Callable[[Mapping[str, Any]], Iterable[str]] | None = None
    scale: str | None = None
    min_group: int = 1

    def check_params(self, **params: Any) -> dict[str, Any]:
        """The method's parameters, defaults filled in; ValueError naming any unknown one (e.g. a typo in a config)."""
        check_known(params, self.defaults, f"method {self.name!r} parameter(s)")
        return {**self.defaults, **params}

    def required_inputs(self, **params: Any) -> frozenset[str]:
        """The `GroupBatch` fields this method reads with these parameters (build only these)."""
        full = self.check_params(**params)
        extra = frozenset(self.needs_for(full)) if self.needs_for is not None else frozenset()
        return self.needs | extra

    def __call__(self, batch: GroupBatch, advantages: Any = None, **params: Any) -> torch.Tensor:
        """Run the method on `batch` (and the base `advantages` (B, G) for an "advantage" method)."""
        if not isinstance(batch, GroupBatch):
            raise TypeError(f"method {self.name!r} takes a setpo.methods.GroupBatch, got {type(batch).__name__}")
        missing = sorted(self.required_inputs(**params) - batch.present())
        if missing:
            raise ValueError(f"method {self.name!r} needs GroupBatch field(s) {missing}, which the batch lacks")
        if self.entry == "advantage":
            if advantages is None:
                raise ValueError(f"method {self.name!r} enters after the normalisation: pass advantages (B, G)")
            return self.fn(batch, check_group_tensor(advantages, "advantages", batch), **params)
        if advantages is not None:
            raise ValueError(f"method {self.name!r} is a {self.entry!r} method and takes no advantages")
        return self.fn(batch, **params)


_REGISTRY: dict[str, Method] = {}


def register_method(
    name: str,
    *,
    entry: Entry,
    needs: Iterable[str],
    citation: str,
    group_scale: GroupScale | None = None,
    needs_for: Callable[[Mapping[str, Any]], Iterable[str]] | None = None,
    scale: str | None = None,
    min_group: int = 1,
) -> Callable[[Callable[..., torch.Tensor]], Callable[..., torch.Tensor]]:
    """Decorator registering `fn` under `name` (refuses an existing name, an unknown entry or input field).

    The function's keyword parameters with defaults are the method's parameters; the first line of its docstring
    is its formula. ``needs_for(params)`` adds inputs that depend on the parameters (e.g. the partition used).
    ``scale`` names the parameter that weights the method's term linearly; ``min_group`` the fewest rows of a group
    it acts on.
    """
    check_str(name, "method name", blank=True)
    check_choice(entry, "entry", ENTRIES)
    needs = frozenset(needs)
    check_known(needs, INPUT_FIELDS, "GroupBatch field(s)")
    check_choice(group_scale, "group_scale", (None, "group", "none"))
    check_int(min_group, "min_group", minimum=1)

    def decorate(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        if name in _REGISTRY:
            raise ValueError(f"method {name!r} is already registered")
        sig = inspect.signature(fn)
        positional = 2 if entry == "advantage" else 1
        params = list(sig.parameters.values())
        defaults = {p.name: p.default for p in params[positional:]}
        if len(params) < positional or any(v is inspect.Parameter.empty for v in defaults.values()):
            raise ValueError(f"method {name!r}: after its {positional} input(s) every parameter needs a default")
        if scale is not None and scale not in defaults:
            raise ValueError(f"method {name!r}: scale {scale!r} is not one of its parameters {sorted(defaults)}")
        doc = inspect.getdoc(fn) or ""
        if not doc:
            raise ValueError(f"method {name!r} needs a docstring whose first line is its formula")
        _REGISTRY[name] = Method(
            name=name,
            entry=entry,
            fn=fn,
            needs=needs,
            citation=citation,
            formula=doc.splitlines()[0],
            defaults=defaults,
            group_scale=group_scale,
            needs_for=needs_for,
            scale=scale,
            min_group=min_group,
        )
        return fn

    return decorate


def available_methods(entry: Entry | None = None) -> list[str]:
    """The registered names (of one entry point, if given), sorted."""
    if entry is not None:
        check_choice(entry, "entry", ENTRIES)
    return sorted(n for n, m in _REGISTRY.items() if entry is None or m.entry == entry)


def get_method(name: str) -> Method:
    """The method registered under `name`; ValueError listing the registered names otherwise."""
    return _REGISTRY[check_choice(name, "method", available_methods())]
