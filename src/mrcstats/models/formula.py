"""R/lme4 model formulas, parsed (never ``eval``-ed) into a small frozen spec.

Supported (as R's ``terms.formula`` and lme4's ``findbars``/``expandSlash``):

* response: a column name, ``cbind(s, f)`` or ``cbind(s, n - s)`` (arithmetic of
  names and numbers with ``+ - * /`` inside ``cbind``);
* fixed effects: ``+ - * / : ^ ( )``, ``1``/``0``/``-1``, variables, and the calls
  ``scale(x)``, ``factor(x)``, ``as.factor(x)``, ``log(x)``, ``exp(x)``, ``sqrt(x)``;
* random intercepts: ``(1 | g)``, ``(1 | a:b)``, ``(1 | a/b)`` (= ``(1 | a) + (1 | b:a)``,
  lme4's naming), several of them (nested or crossed). Random slopes are refused
  by the native engine (``ModelSpec.random_slopes`` records them for ``engine="lme4"``).

Term order follows R: terms sorted by their order (number of variables), stable
in order of appearance; within a term the variables are ordered by their first
appearance in the formula; labels are the variable names joined by ``:``.
Random-effect terms are ordered as lme4's ``mkReTrms`` does (by decreasing
number of levels), which happens in :mod:`mrcstats.models.design`.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from mrcstats.errors import InputError

#: calls allowed on a single variable in the fixed part
TRANSFORMS = ("scale", "factor", "as.factor", "log", "exp", "sqrt")


@dataclass(frozen=True)
class Variable:
    """One variable of the fixed part: a column, possibly transformed.

    ``label`` is how R prints it (``scaled_tok``, ``scale(x)``, ``factor(k)``).
    """

    column: str
    transform: str | None = None  # one of TRANSFORMS or None

    @property
    def label(self) -> str:
        col = self.column if _is_syntactic(self.column) else f"`{self.column}`"
        return f"{self.transform}({col})" if self.transform else col


@dataclass(frozen=True)
class Term:
    """A fixed-effect term: an ordered tuple of variables (``()`` is the intercept)."""

    variables: tuple[Variable, ...]

    @property
    def label(self) -> str:
        return ":".join(v.label for v in self.variables) if self.variables else "(Intercept)"

    @property
    def order(self) -> int:
        return len(self.variables)

    def contains(self, other: Term) -> bool:
        """True if every variable of ``other`` is in this term (R's marginality)."""
        return set(other.variables) <= set(self.variables)


@dataclass(frozen=True)
class RandomTerm:
    """A random-effects term ``(lhs | g)`` as lme4's ``findbars``/``mkReTrms`` read it.

    ``factors`` are the columns crossed into the grouping factor ``g`` (``name`` is
    lme4's group name: ``passage``, ``b:a``); ``terms`` are the left-hand side's model
    terms besides the intercept (``x`` in ``(1 + x | g)``), ``intercept`` whether the
    left-hand side has one. ``(1 | g)`` is ``terms=()``, ``intercept=True``.
    """

    factors: tuple[str, ...]
    terms: tuple[Term, ...] = ()
    intercept: bool = True

    @property
    def name(self) -> str:
        return ":".join(self.factors)

    @property
    def is_scalar(self) -> bool:
        """True for a random intercept ``(1 | g)``."""
        return self.intercept and not self.terms

    @property
    def slopes(self) -> tuple[str, ...]:
        """Data columns of the left-hand side (``()`` for a random intercept)."""
        return tuple(dict.fromkeys(v.column for t in self.terms for v in t.variables))

    @property
    def lhs(self) -> str:
        labels = [t.label for t in self.terms]
        if not self.intercept:
            return " + ".join(["0"] + labels)
        return " + ".join(["1"] + labels)

    @property
    def text(self) -> str:
        return f"({self.lhs} | {self.name})"


@dataclass(frozen=True)
class Response:
    """The left-hand side: ``column`` alone, or ``cbind(successes, failures)``.

    ``successes``/``failures`` are small arithmetic expressions kept as token tuples
    (names, numbers and ``+ - * /``), evaluated on the data in design.py.
    """

    column: str | None = None
    successes: tuple[str, ...] | None = None
    failures: tuple[str, ...] | None = None
    text: str = ""

    @property
    def is_cbind(self) -> bool:
        return self.successes is not None

    @property
    def columns(self) -> tuple[str, ...]:
        if self.column is not None:
            return (self.column,)
        names = [t for t in (self.successes or ()) + (self.failures or ()) if NAME_RE.fullmatch(t)]
        return tuple(dict.fromkeys(unquote(t) for t in names))


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model: response, fixed terms in R order, intercept flag, random terms; the front door
    (:func:`mrcstats.models.fit.glmer`) adds the family and a weights column, so every fitting path
    (in memory, out of core, lme4) takes this one object instead of formula text."""

    formula: str
    response: Response
    terms: tuple[Term, ...]
    intercept: bool
    random: tuple[RandomTerm, ...] = ()
    family: Any = None              # a mrcstats.models.family.Family once the front door has chosen it (with_family)
    weights: str | None = None      # the prior-weights column (R's weights=), when given by name

    @property
    def random_slopes(self) -> tuple[str, ...]:
        """Texts of the random-effects terms that are not plain intercepts (``(1 + x | g)``)."""
        return tuple(r.text for r in self.random if not r.is_scalar)

    @property
    def term_labels(self) -> tuple[str, ...]:
        return tuple(t.label for t in self.terms)

    @property
    def fixed_columns(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for t in self.terms:
            for v in t.variables:
                seen[v.column] = None
        return tuple(seen)

    @property
    def columns(self) -> tuple[str, ...]:
        """Every data column the formula uses (response, fixed, grouping), in order."""
        seen: dict[str, None] = dict.fromkeys(self.response.columns)
        seen.update(dict.fromkeys(self.fixed_columns))
        for r in self.random:
            seen.update(dict.fromkeys(r.factors))
            seen.update(dict.fromkeys(r.slopes))
        return tuple(seen)

    def with_family(self, family: Any) -> ModelSpec:
        """The spec with its family (a :class:`~mrcstats.models.family.Family` or R's name for one, as
        :func:`~mrcstats.models.family.get_family` reads it): the one track a family travels on, from the front door
        to the design, the engines and the refits."""
        from mrcstats.models.family import get_family

        return dataclasses.replace(self, family=get_family(family))

    def require_family(self) -> Any:
        """The spec's family; a spec without one is an InputError at the boundary, never a silent binomial."""
        if self.family is None:
            raise InputError(f"formula {self.formula!r}: the model has no family; give one "
                             "(spec.with_family('binomial'), or mrcstats.glmer(..., family=...))")
        return self.family

    def term(self, label: str) -> Term:
        for t in self.terms:
            if t.label == label:
                return t
        raise InputError(f"no term {label!r} in formula {self.formula!r}; terms: {list(self.term_labels)}")

    def droppable(self) -> tuple[str, ...]:
        """Terms that may be dropped respecting marginality (R's ``drop.scope``)."""
        out = []
        for t in self.terms:
            if not any(o is not t and o.order > t.order and o.contains(t) for o in self.terms):
                out.append(t.label)
        return tuple(out)

    def drop(self, label: str) -> ModelSpec:
        """The spec with fixed term ``label`` removed (like ``update(m, . ~ . - label)``)."""
        t = self.term(label)
        terms = tuple(x for x in self.terms if x is not t)
        return dataclasses.replace(self, terms=terms, formula=deparse(self.response, terms, self.intercept,
                                                                      self.random))

    def fixed_rhs(self) -> str:
        parts = ([] if self.intercept else ["0"]) + list(self.term_labels)
        return " + ".join(parts) if parts else "1"


def deparse(response: Response, terms, intercept: bool, random) -> str:
    """Formula text of a spec (R's ``deparse`` spacing: ``y ~ a + b + (1 | g)``)."""
    rhs = ([] if intercept else ["0"]) + [t.label for t in terms]
    rhs += [r.text for r in random]
    return f"{response.text} ~ {' + '.join(rhs) if rhs else '1'}"


# ----------------------------------------------------------------------------- tokens

NAME_RE = re.compile(r"`[^`]+`|[A-Za-z.][A-Za-z0-9._]*")
_TOKEN_RE = re.compile(r"\s*(?:(`[^`]+`|[A-Za-z.][A-Za-z0-9._]*)|(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
                       r"|(%in%|\|\||[-+*/:^()|~,]))")


def _is_syntactic(name: str) -> bool:
    return re.fullmatch(r"[A-Za-z.][A-Za-z0-9._]*", name) is not None and not re.match(r"\.\d", name)


def unquote(name: str) -> str:
    return name[1:-1] if name.startswith("`") else name


def _tokenize(text: str) -> list[str]:
    toks: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m or m.end() == pos:
            raise InputError(f"formula {text!r}: cannot read {text[pos:].strip()[:20]!r} at position {pos + 1}; "
                             "use R syntax such as 'y ~ x * f + (1 | g)'")
        toks.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    return toks


# ----------------------------------------------------------------------------- parser
# AST nodes are tuples: ("var", Variable) ("num", str) ("bin", op, a, b) ("neg", a) ("paren", a)
# ("bar", lhs, rhs) ("call", name, args)

_BINARY_PREC = {"|": 1, "||": 1, "+": 2, "-": 2, "*": 3, "/": 3, "%in%": 4, ":": 5, "^": 7}


class _Parser:
    def __init__(self, text: str, toks: list[str]):
        self.text, self.toks, self.i = text, toks, 0

    def err(self, msg: str) -> InputError:
        return InputError(f"formula {self.text!r}: {msg}")

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, tok: str | None = None) -> str:
        t = self.peek()
        if t is None or (tok is not None and t != tok):
            raise self.err(f"expected {tok!r}" + (f" but found {t!r}" if t else " but the formula ended"))
        self.i += 1
        return t

    def expr(self, min_prec: int = 0):
        left = self.unary()
        while True:
            op = self.peek()
            prec = _BINARY_PREC.get(op or "")
            if prec is None or prec < min_prec:
                return left
            self.i += 1
            # '^' is right-associative, the rest left-associative
            right = self.expr(prec if op == "^" else prec + 1)
            left = ("bin", op, left, right)

    def unary(self):
        t = self.peek()
        if t == "-":
            self.i += 1
            return ("neg", self.expr(6))
        if t == "+":
            self.i += 1
            return self.expr(6)
        return self.atom()

    def atom(self):
        t = self.peek()
        if t is None:
            raise self.err("the formula ended early")
        if t == "(":
            self.i += 1
            inner = self.expr()
            self.take(")")
            return ("paren", inner)
        if re.fullmatch(r"\d.*", t):
            self.i += 1
            return ("num", t)
        if NAME_RE.fullmatch(t):
            self.i += 1
            if self.peek() == "(":
                self.i += 1
                args = []
                start = self.i
                depth = 0
                # keep the raw tokens of each argument (cbind arithmetic, transforms)
                cur: list[str] = []
                while True:
                    tok = self.peek()
                    if tok is None:
                        raise self.err(f"unclosed '(' after {t}")
                    self.i += 1
                    if tok == "(":
                        depth += 1
                    elif tok == ")":
                        if depth == 0:
                            break
                        depth -= 1
                    if tok == "," and depth == 0:
                        args.append(tuple(cur))
                        cur = []
                        continue
                    cur.append(tok)
                del start
                args.append(tuple(cur))
                return ("call", t, tuple(args))
            return ("var", Variable(unquote(t)))
        raise self.err(f"unexpected {t!r}")


# ----------------------------------------------------------------------------- term algebra
# A term set is an ordered dict {frozenset(variables): None}; the empty set is the intercept.


class _Terms:
    __slots__ = ("intercept", "random", "terms")

    def __init__(self, terms=None, intercept=None, random=None):
        self.terms: dict[frozenset, None] = terms or {}
        self.intercept: bool | None = intercept  # None = not mentioned
        self.random: list[RandomTerm] = random or []


def _evaluate(node, p: _Parser) -> _Terms:
    kind = node[0]
    if kind == "var":
        return _Terms({frozenset([node[1]]): None})
    if kind == "num":
        if node[1] in ("1", "1.0"):
            return _Terms(intercept=True)
        if node[1] in ("0", "0.0"):
            return _Terms(intercept=False)
        raise p.err(f"the number {node[1]} cannot be a term (only 1 and 0 can)")
    if kind == "paren":
        inner = node[1]
        if inner[0] == "bin" and inner[1] in ("|", "||"):
            return _random(inner, p)
        return _evaluate(inner, p)
    if kind == "neg":
        sub = _evaluate(node[1], p)
        out = _Terms(intercept=None)
        if sub.intercept:
            out.intercept = False
        if sub.terms or sub.random:
            raise p.err("a term cannot start with '-' except '-1'")
        return out
    if kind == "call":
        name, args = node[1], node[2]
        if name not in TRANSFORMS:
            raise p.err(f"the function {name}() is not supported in the fixed part "
                        f"(supported: {', '.join(TRANSFORMS)}); compute the column beforehand")
        if len(args) < 1 or len(args[0]) != 1 or not NAME_RE.fullmatch(args[0][0]):
            raise p.err(f"{name}() takes a single column name, e.g. {name}(x)")
        if len(args) > 1:
            raise p.err(f"{name}() with extra arguments is not supported; use {name}(x)")
        tr = "factor" if name == "as.factor" else name
        var = Variable(unquote(args[0][0]), tr)
        if name == "as.factor":
            var = Variable(unquote(args[0][0]), "as.factor")
        return _Terms({frozenset([var]): None})
    if kind == "bin":
        op, a, b = node[1], node[2], node[3]
        if op in ("|", "||"):
            raise p.err("a random-effects term must be in parentheses, e.g. (1 | g)")
        if op == "^":
            if b[0] != "num" or not b[1].isdigit():
                raise p.err("'^' needs a whole number, e.g. (a + b + c)^2")
            base = _evaluate(a, p)
            n = int(b[1])
            out = base
            for _ in range(n - 1):
                out = _product(out, base, p, keep_parts=True)
            out.terms = {t: None for t in out.terms if len(t) <= n}
            return out
        ta = _evaluate(a, p)
        if op == "-":
            tb = _evaluate(b, p)
            out = _Terms(dict(ta.terms), ta.intercept, list(ta.random))
            for t in tb.terms:
                out.terms.pop(t, None)
            if tb.intercept is True:
                out.intercept = False
            elif tb.intercept is False:
                out.intercept = True
            if tb.random:
                raise p.err("random-effects terms cannot be removed with '-'")
            return out
        tb = _evaluate(b, p)
        if op == "+":
            terms = dict(ta.terms)
            terms.update(tb.terms)
            inter = tb.intercept if tb.intercept is not None else ta.intercept
            return _Terms(terms, inter, ta.random + tb.random)
        if op == "*":
            return _product(ta, tb, p, keep_parts=True)
        if op == ":":
            return _product(ta, tb, p, keep_parts=False)
        if op in ("/", "%in%"):
            if op == "%in%":
                return _product(ta, tb, p, keep_parts=False)
            allvars = frozenset().union(*ta.terms) if ta.terms else frozenset()
            terms = dict(ta.terms)
            for t in tb.terms:
                terms[allvars | t] = None
            return _Terms(terms, ta.intercept, ta.random + tb.random)
    raise p.err("cannot read this formula")  # pragma: no cover


def _product(ta: _Terms, tb: _Terms, p: _Parser, keep_parts: bool) -> _Terms:
    if ta.random or tb.random:
        raise p.err("random-effects terms cannot be multiplied or crossed with ':'")
    terms: dict[frozenset, None] = {}
    if keep_parts:
        terms.update(ta.terms)
        terms.update(tb.terms)
    for x in ta.terms:
        for y in tb.terms:
            terms[x | y] = None
    return _Terms(terms, None)


def _random(node, p: _Parser) -> _Terms:
    """A bar ``(lhs | g)`` or ``(lhs || g)`` as lme4's ``findbars``/``expandDoubleVerts``.

    The left-hand side is read as a model formula (``1 + x``, ``x`` = ``1 + x``,
    ``0 + x``, ``x - 1``); ``||`` splits it into uncorrelated terms ``(1 | g) + (0 + x | g)``
    (numeric variables only, as lme4's expansion is documented for).
    """
    op, lhs, rhs = node[1], node[2], node[3]
    bar = f"({_node_text(lhs)} {op} {_node_text(rhs)})"
    groups = _group_factors(rhs, p)
    if lhs[0] == "num" and lhs[1] in ("1", "1.0"):
        terms, intercept = [], True
    else:
        try:
            fixed = _evaluate(lhs, p)
        except InputError as exc:
            raise p.err(f"random-effects term {bar}: {exc}") from None
        if fixed.random:
            raise p.err(f"random-effects term {bar}: a bar inside a bar")
        order: dict[Variable, int] = {}
        _collect_vars(lhs, order)
        terms = [Term(tuple(sorted(t, key=lambda v: order.get(v, 10**9)))) for t in fixed.terms if t]
        terms.sort(key=lambda t: t.order)
        intercept = fixed.intercept is not False
        if not terms and not intercept:
            raise p.err(f"random-effects term {bar} has no columns (0 and no variable); "
                        "write (1 | g) for a random intercept")
    out: list[RandomTerm] = []
    for g in groups:
        if op == "||":
            if intercept:
                out.append(RandomTerm(tuple(g)))
            out.extend(RandomTerm(tuple(g), (t,), False) for t in terms)
        else:
            out.append(RandomTerm(tuple(g), tuple(terms), intercept))
    return _Terms(random=out)


def _group_factors(node, p: _Parser) -> list[list[str]]:
    """lme4's ``expandSlash``: ``a/b`` -> [[a], [b, a]]; ``a:b`` -> [[a, b]]."""
    kind = node[0]
    if kind == "var":
        if node[1].transform:
            raise p.err("a grouping factor must be a plain column name")
        return [[node[1].column]]
    if kind == "paren":
        return _group_factors(node[1], p)
    if kind == "call" and node[1] in ("factor", "as.factor") and len(node[2]) == 1 and len(node[2][0]) == 1:
        return [[unquote(node[2][0][0])]]
    if kind == "bin" and node[1] == ":":
        left = _group_factors(node[2], p)
        right = _group_factors(node[3], p)
        if len(left) != 1 or len(right) != 1:
            raise p.err("write nested grouping as (1 | a/b), not with ':' around '/'")
        return [left[0] + right[0]]
    if kind == "bin" and node[1] == "/":
        outer = _group_factors(node[2], p)
        inner = _group_factors(node[3], p)
        if len(inner) != 1:
            raise p.err("nested grouping a/b/c: write it as (1 | a/b/c) with plain names")
        # lme4: (1|a/b) -> (1|b:a) + (1|a); (1|a/b/c) -> c:b:a, b:a, a
        return [inner[0] + outer[0]] + outer
    if kind == "bin" and node[1] == "+":
        return _group_factors(node[2], p) + _group_factors(node[3], p)
    raise p.err(f"cannot read the grouping factor {_node_text(node)!r}; use (1 | g), (1 | a:b) or (1 | a/b)")


def _node_text(node) -> str:
    kind = node[0]
    if kind == "var":
        return node[1].label
    if kind == "num":
        return node[1]
    if kind == "paren":
        return f"({_node_text(node[1])})"
    if kind == "neg":
        return f"-{_node_text(node[1])}"
    if kind == "call":
        return f"{node[1]}({', '.join(' '.join(a) for a in node[2])})"
    op = node[1]
    sep = op if op in (":", "^", "/") else f" {op} "
    return f"{_node_text(node[2])}{sep}{_node_text(node[3])}"


# ----------------------------------------------------------------------------- response


def _response(toks: list[str], text: str) -> Response:
    if not toks:
        raise InputError(f"formula {text!r}: no response before '~'")
    raw = " ".join(toks)
    if len(toks) == 1 and NAME_RE.fullmatch(toks[0]):
        return Response(column=unquote(toks[0]), text=toks[0])
    if toks[0] == "cbind" and len(toks) >= 4 and toks[1] == "(" and toks[-1] == ")":
        inner = toks[2:-1]
        depth, split = 0, None
        for k, t in enumerate(inner):
            depth += t == "("
            depth -= t == ")"
            if t == "," and depth == 0:
                if split is not None:
                    raise InputError(f"formula {text!r}: cbind() takes two arguments (successes, failures)")
                split = k
        if split is None:
            raise InputError(f"formula {text!r}: cbind() takes two arguments (successes, failures)")
        s, f = tuple(inner[:split]), tuple(inner[split + 1:])
        for part in (s, f):
            if not part or any(not (NAME_RE.fullmatch(t) or re.fullmatch(r"[\d.eE+-]+|[-+*/()]", t))
                               for t in part):
                raise InputError(f"formula {text!r}: cbind() arguments may use column names, numbers "
                                 "and + - * /, e.g. cbind(s, n - s)")
        txt = f"cbind({_arith_text(s)}, {_arith_text(f)})"
        return Response(successes=s, failures=f, text=txt)
    raise InputError(f"formula {text!r}: the response {raw!r} must be a column name or cbind(successes, failures)")


def _arith_text(toks: tuple[str, ...]) -> str:
    out = ""
    for t in toks:
        if t in "+-*/" and len(t) == 1:
            out += f" {t} "
        else:
            out += t
    return out


# ----------------------------------------------------------------------------- public


def parse_formula(text: str) -> ModelSpec:
    """Parse an R/lme4 formula into a :class:`ModelSpec` (no code is evaluated).

    >>> parse_formula("correct ~ scaled_tok * LLM + (1 | passage)").term_labels
    ('scaled_tok', 'LLM', 'scaled_tok:LLM')
    """
    if not isinstance(text, str) or "~" not in text:
        raise InputError(f"formula {text!r}: expected 'response ~ terms', e.g. 'correct ~ x + (1 | passage)'")
    toks = _tokenize(text)
    if toks.count("~") != 1:
        raise InputError(f"formula {text!r}: expected exactly one '~'")
    k = toks.index("~")
    response = _response(toks[:k], text)
    rhs = toks[k + 1:]
    if not rhs:
        raise InputError(f"formula {text!r}: nothing after '~'")
    p = _Parser(text, rhs)
    node = p.expr()
    if p.peek() is not None:
        raise p.err(f"unexpected {p.peek()!r} at the end")
    ts = _evaluate(node, p)
    intercept = ts.intercept is not False

    # variable order: first appearance in the formula (R's "variables" attribute)
    order: dict[Variable, int] = {}
    for t in ts.terms:
        for v in t:
            pass
    _collect_vars(node, order)
    terms: list[Term] = []
    for t in ts.terms:
        if not t:
            continue
        vs = tuple(sorted(t, key=lambda v: order.get(v, 10**9)))
        terms.append(Term(vs))
    # R: sort by order, stable in order of appearance
    terms.sort(key=lambda t: t.order)
    cols = {v.column for t in terms for v in t.variables}
    for col in response.columns:
        if col in cols:
            raise InputError(f"formula {text!r}: the response column {col!r} is also a predictor")
    random = []
    seen = set()
    for r in ts.random:
        if r.text in seen:
            continue
        seen.add(r.text)
        random.append(r)
    return ModelSpec(formula=_normalise(text), response=response, terms=tuple(terms), intercept=intercept,
                     random=tuple(random))


def _collect_vars(node, order: dict) -> None:
    kind = node[0]
    if kind == "var":
        order.setdefault(node[1], len(order))
    elif kind == "call" and node[1] in TRANSFORMS:
        tr = node[1]
        if node[2] and len(node[2][0]) == 1:
            order.setdefault(Variable(unquote(node[2][0][0]), tr), len(order))
    elif kind in ("paren", "neg"):
        _collect_vars(node[1], order)
    elif kind == "bin":
        if node[1] in ("|", "||"):
            return
        _collect_vars(node[2], order)
        _collect_vars(node[3], order)


def _normalise(text: str) -> str:
    """R's deparse spacing: single spaces around ``~ + - * | /``... kept simple."""
    return re.sub(r"\s+", " ", text.strip())
