"""Symbols: a demangled C++ function name as a person reads it in a table.

callgrind names a function by its full demangled signature: every template argument, the
parameter list, the return type of a template function. In MXNet such a name runs to 300–500
characters (`void mxnet::op::mxnet_op::Kernel<mxnet::op::mxnet_op::op_with_req<…>, mshadow::cpu>::
Launch<float*, …>(mshadow::Stream<mshadow::cpu>*, unsigned long, …)`), and a table of them is
unreadable. What tells one function from another is its qualified name: `short_name` keeps that
and elides the rest (template arguments to `<…>`, parameter lists to `(…)`, the return type, the
trailing `const`/`&`/`noexcept`), keeping what is part of the name itself: `(anonymous namespace)`,
lambdas `{lambda(…)#1}`, operators (`operator<<`, `operator()`, `operator new`), `[clone .isra.0]`.
The full name stays in the JSON; `distinct` shows more of the names that would read alike.

The name is read into a tree of bracket groups; a name the reader cannot balance is shown
whole (cut to the width), never guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Tuple, Union

#: widest a shortened name is shown (tables stay within 160 characters a row)
WIDTH = 64
ELLIPSIS = "…"
_PAIRS = {"<": ">", "(": ")", "[": "]", "{": "}"}
#: operator tokens after `operator`, longest first, so `<<=` is not read as `<` and a group
_OPERATORS = sorted(["<<=", ">>=", "<=>", "->*", "()", "[]", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++",
                     "--", "->", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "+", "-", "*", "/", "%", "^",
                     "&", "|", "~", "!", "=", "<", ">", ","], key=len, reverse=True)
_KEYWORD = re.compile(r"(?<![\w$])operator(?![\w$])")
_CLONE = re.compile(r"(\s*\[clone [^\]]*\])+$")
_QUALIFIERS = re.compile(r"(\s+(const|volatile|&&|&|noexcept))+$")
#: how callgrind names a function without a symbol: its address
_UNNAMED = re.compile(r"^0x0*([0-9a-fA-F]+)$")
#: a parenthesised part of the name itself, not a parameter list
_KEEP_WHOLE = {"anonymous namespace"}


@dataclass
class _Group:
    """A bracketed part of a name: `<…>`, `(…)`, `[…]` or `{…}`."""

    open: str
    items: List[Union[str, "_Group"]] = field(default_factory=list)


class _Unbalanced(ValueError):
    """A name whose brackets do not pair up (an expression inside a template argument)."""


def split_key(key: str) -> Tuple[str, str]:
    """(function, where) of a stored profile row's `function`: `name [where]`, where is the
    shared object or the source file (benchcore.measure.callgrind); where is "" when absent."""
    name, sep, where = key.rpartition(" [")
    if not sep or not where.endswith("]") or where.startswith("clone "):
        return key, ""
    return name, where[:-1]


def short_name(name: str, keep: int = 0) -> str:
    """The name with template arguments deeper than `keep` levels elided to `<…>`, every
    non-empty parameter list to `(…)`, the return type and trailing qualifiers left out."""
    unnamed = _UNNAMED.match(name)
    if unnamed:
        return "0x" + unnamed.group(1)
    clone = _CLONE.search(name)
    suffix = clone.group(0).strip() if clone else ""
    core = _QUALIFIERS.sub("", name[:clone.start()] if clone else name).strip()
    try:
        items = _parse(core)
    except _Unbalanced:
        return name
    shown = _render(_function_part(items), keep)
    return f"{shown} {suffix}" if suffix else shown


def is_unnamed(name: str) -> bool:
    """Whether callgrind named the function by its address (no symbol: a stripped object's)."""
    return bool(_UNNAMED.match(name))


def fit(text: str, width: int = WIDTH) -> str:
    """`text` within `width` characters: its leading scopes cut at a `::` outside any brackets
    (`…::Launch<…>(…)`), the end being what names the function; where no such cut is short
    enough, the last scope with its end cut."""
    if len(text) <= width:
        return text
    scopes = _scopes(text)
    for cut in scopes:
        if len(text) - cut + len(ELLIPSIS) <= width:
            return ELLIPSIS + text[cut:]
    tail = ELLIPSIS + text[scopes[-1]:] if scopes else text
    return tail[:width - len(ELLIPSIS)] + ELLIPSIS


def _scopes(text: str) -> List[int]:
    """Where `::` stands outside every bracket, first to last (a name that does not balance: none)."""
    depth, found = 0, []
    for i, char in enumerate(text):
        if char in "<([{":
            depth += 1
        elif char in ">)]}":
            depth -= 1
        elif depth == 0 and text.startswith("::", i) and not text.startswith("::", i - 1):
            found.append(i)
    return found if depth == 0 else []


def distinct(names: List[str], width: int = WIDTH) -> Dict[str, str]:
    """Each full name → how a table shows it: shortened, with more template levels kept for
    names that would otherwise read alike, and the full name where even that does not tell them
    apart (then cut to `width`)."""
    shown = {name: short_name(name) for name in names}
    for keep in range(1, 6):
        clashes = _clashing(shown)
        if not clashes:
            break
        for name in clashes:
            shown[name] = short_name(name, keep)
    for name in _clashing(shown):
        shown[name] = name
    return {name: fit(text, width) for name, text in shown.items()}


def _clashing(shown: Dict[str, str]) -> List[str]:
    seen: Dict[str, List[str]] = {}
    for name, text in shown.items():
        seen.setdefault(text, []).append(name)
    return [name for group in seen.values() if len(group) > 1 for name in group]


def _parse(text: str) -> List[Union[str, _Group]]:
    """The name as text and bracket groups; `operator` tokens kept as text."""
    root = _Group("")
    stack = [root]
    i = 0
    while i < len(text):
        token, i = _next_token(text, i)
        top = stack[-1]
        if token in _PAIRS:
            group = _Group(token)
            top.items.append(group)
            stack.append(group)
        elif len(token) == 1 and token in ">)]}" and (top.open and _PAIRS[top.open] == token):
            stack.pop()
        elif len(token) == 1 and token in ")]}":
            raise _Unbalanced(text)
        else:
            top.items.append(token)
    if len(stack) != 1:
        raise _Unbalanced(text)
    return root.items


def _next_token(text: str, i: int) -> Tuple[str, int]:
    """The next token at i: an `operator…` name as one token, `->` as text, a bracket, or a character."""
    match = _KEYWORD.match(text, i)
    if match:
        j = match.end()
        for op in _OPERATORS:
            if text.startswith(op, j):
                return text[i:j + len(op)], j + len(op)
        for word in ("new[]", "delete[]", " new[]", " delete[]", " new", " delete"):
            if text.startswith(word, j):
                return text[i:j + len(word)], j + len(word)
        return text[i:j], j  # a conversion operator: its type follows as ordinary text
    if text.startswith("->", i):
        return "->", i + 2
    return text[i], i + 1


def _function_part(items: List[Union[str, _Group]]) -> List[Union[str, _Group]]:
    """The qualified name and its parameter list, without the return type: what follows the last
    space at the top level (or the space before a top-level `operator`); a function returning a
    function pointer, `R (*name(args))(args)`, is read inside its parentheses."""
    last = items[-1] if items else None
    if isinstance(last, _Group) and last.open == "(" and len(items) >= 2:
        inner = items[-2]
        if isinstance(inner, _Group) and inner.open == "(" and inner.items[:1] in (["*"], ["&"]):
            return _function_part(inner.items[1:])
    start = 0
    operator_at = next((k for k, item in enumerate(items) if isinstance(item, str) and item.startswith("operator")),
                       len(items))
    for k, item in enumerate(items[:operator_at]):
        if item == " ":
            start = k + 1
    return items[start:]


def _render(items: List[Union[str, _Group]], keep: int) -> str:
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif item.open == "<":
            out.append("<" + (_render(item.items, keep - 1) if keep > 0 or not item.items else ELLIPSIS) + ">")
        elif item.open == "(":
            whole = _render(item.items, keep)
            out.append("(" + (whole if whole in _KEEP_WHOLE or not item.items else ELLIPSIS) + ")")
        else:
            out.append(item.open + _render(item.items, keep) + _PAIRS[item.open])
    return "".join(out)

