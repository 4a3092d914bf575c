"""Extract every topic and broker config Kafka defines from its source (the oracle of
tests/server/test_config_table.py), into kafka_configs.json beside this file.

    python tests/server/extract_kafka_configs.py /path/to/kafka-source-tree [commit]

Reads the ConfigDef chains that define them (3.8: LogConfig.java's CONFIG for topics;
KafkaConfig.scala's configDef plus RemoteLogManagerConfig.configDef() for brokers) and
resolves each argument through the `static final` constants of every Java file of the
tree: name, type, default (as Kafka renders it in DescribeConfigs), validator (its source
text) and documentation. A Java expression it cannot evaluate (a method call, mostly) is
kept as its source text between braces; the test skips comparing such defaults.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
KNOWN = {
    "Long.MAX_VALUE": LONG_MAX,
    "Long.MIN_VALUE": -(2**63),
    "Integer.MAX_VALUE": INT_MAX,
    "Integer.MIN_VALUE": -(2**31),
    "Double.MAX_VALUE": 1.7976931348623157e308,
    "null": None,
    "true": True,
    "false": False,
    "Collections.emptyList()": [],
}
UNRESOLVED = object()


class Unresolved(Exception):
    pass


def strip_comments(text: str) -> str:
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif c == "'":  # a char literal: '"' would open a string above
            j = i + 1
            while text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            out.append("'?'")
            i = j + 1
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            i = text.find("*/", i) + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def until_semicolon(text: str, i: int) -> tuple[str, int]:
    depth = 0
    start = i
    while i < len(text):
        c = text[i]
        if c == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ";" and depth == 0:
            return text[start:i].strip(), i + 1
        i += 1
    return text[start:].strip(), i


CONST = re.compile(
    r"(?:public|private|protected)?\s*(?:static\s+final|final\s+static)\s+"
    r"[\w<>\[\], .?]+?\s+([A-Z][A-Z0-9_]*)\s*=\s*"
)


class Constants:
    def __init__(self, root: Path) -> None:
        self.raw: dict[str, dict[str, str]] = {}
        for path in root.rglob("*.java"):
            if "/test/" in str(path):
                continue
            text = strip_comments(path.read_text(errors="replace"))
            consts = self.raw.setdefault(path.stem, {})
            for pattern in (CONST, INTERFACE_CONST, STATIC_BLOCK_ASSIGNMENT):
                for m in pattern.finditer(text):
                    expr, _ = until_semicolon(text, m.end())
                    consts.setdefault(m.group(1), expr)
        self.cache: dict[tuple[str, str], Any] = {}
        self.root = root
        self._synonyms: dict[str, str] | None = None

    def server_synonyms(self) -> dict[str, str]:
        """ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS: topic config -> the broker
        config of highest priority, read from the table's helper calls."""
        if self._synonyms is None:
            path = next(self.root.rglob("ServerTopicConfigSynonyms.java"))
            text = strip_comments(path.read_text())
            prefix = {"Log": "log.", "LogCleaner": "log.cleaner.", "": ""}
            found: dict[str, str] = {}
            call = re.compile(
                r"(sameName|single|list)(WithLogPrefix|WithLogCleanerPrefix)?\("
                r"\s*TopicConfig\.(\w+)\s*(?:,\s*(?:new ConfigSynonym\()?\"([^\"]+)\")?"
            )
            for m in call.finditer(text):
                kind, where, const, first = m.groups()
                topic_name = Evaluator(self, "TopicConfig").eval(f"TopicConfig.{const}")
                scope = prefix[(where or "").removeprefix("With").removesuffix("Prefix")]
                found[topic_name] = scope + (topic_name if kind == "sameName" else first)
            self._synonyms = found
        return self._synonyms

    def lookup(self, name: str, cls: str) -> Any:
        if name in KNOWN:
            return KNOWN[name]
        if "." in name:
            owner, _, const = name.rpartition(".")
            owner = owner.rpartition(".")[2]
        else:
            owner, const = cls, name
        key = (owner, const)
        if key in self.cache:
            value = self.cache[key]
            if value is UNRESOLVED:
                raise Unresolved(name)
            return value
        expr = self.raw.get(owner, {}).get(const)
        if expr is None and "." not in name:
            # A static import: the one class that defines it.
            owners = [c for c, consts in self.raw.items() if const in consts]
            if len(owners) == 1:
                owner = owners[0]
                expr = self.raw[owner][const]
        if expr is None:
            raise Unresolved(name)
        self.cache[key] = UNRESOLVED  # cycles
        value = Evaluator(self, owner).eval(expr)
        self.cache[key] = value
        return value


# An interface's constants carry no modifiers (Records.LOG_OVERHEAD).
INTERFACE_CONST = re.compile(
    r"(?m)^\s+(?:int|long|short|byte|double|boolean|String)\s+([A-Z][A-Z0-9_]*)\s*=\s*"
)
# `static final String X_DOC;` assigned in a static block (ZkConfigs).
STATIC_BLOCK_ASSIGNMENT = re.compile(r"(?m)^\s+([A-Z][A-Z0-9_]*_DOC)\s*=\s*")
CASTS = {"int", "long", "short", "double", "float"}

TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:\\.|[^"\\])*")|(?P<num>\d[\d_]*(?:\.\d+)?[LlDdFf]?)'
    r"|(?P<id>[A-Za-z_][\w.]*)|(?P<op>[-+*/(),?:]))"
)


class Evaluator:
    """+ - * / over numbers and strings, parentheses, constants; anything else raises."""

    def __init__(self, constants: Constants, cls: str, lenient: bool = False) -> None:
        self.constants = constants
        self.cls = cls
        # Documentation: a part that cannot be evaluated (a stream over an enum) is left
        # out rather than losing the whole text.
        self.lenient = lenient

    def sub(self, tokens: list[tuple[str, str]]) -> Any:
        ev = Evaluator(self.constants, self.cls, self.lenient)
        ev.tokens, ev.i = tokens, 0
        return ev.sum()

    def eval(self, expr: str) -> Any:
        self.tokens = []
        pos = 0
        expr = expr.strip().replace(".toInt", "")  # Scala's Long -> Int
        while pos < len(expr):
            m = TOKEN.match(expr, pos)
            if m is None or m.end() == pos:
                raise Unresolved(expr)
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0
        value = self.sum()
        if self.i != len(self.tokens):
            raise Unresolved(expr)
        return value

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def sum(self) -> Any:
        value = self.product()
        while (t := self.peek()) and t[1] in "+-" and t[0] == "op":
            self.i += 1
            right = self.product()
            if t[1] == "+":
                if isinstance(value, str) or isinstance(right, str):
                    value = java_str(value) + java_str(right)
                else:
                    value = value + right
            else:
                value = value - right
        return value

    def product(self) -> Any:
        value = self.unary()
        while (t := self.peek()) and t[0] == "op" and t[1] in "*/":
            self.i += 1
            right = self.unary()
            value = (
                value * right
                if t[1] == "*"
                else (
                    value // right
                    if isinstance(value, int) and isinstance(right, int)
                    else value / right
                )
            )
        return value

    def unary(self) -> Any:
        t = self.peek()
        if t == ("op", "-"):
            self.i += 1
            return -self.unary()
        if t == ("op", "("):
            nxt = self.tokens[self.i + 1 : self.i + 3]
            if len(nxt) == 2 and nxt[0][1] in CASTS and nxt[1] == ("op", ")"):
                self.i += 3  # a cast: (int) TimeUnit.DAYS.toMillis(7)
                value = self.unary()
                return int(value) if nxt[0][1] != "double" else float(value)
            self.i += 1
            value = self.sum()
            if self.peek() != ("op", ")"):
                raise Unresolved("(")
            self.i += 1
            return value
        if t is None:
            raise Unresolved("end")
        self.i += 1
        kind, text = t
        if kind == "str":
            return bytes(text[1:-1], "utf-8").decode("unicode_escape")
        if kind == "num":
            text = text.replace("_", "").rstrip("LlDdFf")
            return float(text) if "." in text else int(text)
        if kind == "id":
            if self.peek() == ("op", "("):  # a method call: only a few are known
                args_start = self.i
                depth = 0
                while True:
                    tok = self.peek()
                    if tok is None:
                        raise Unresolved(text)
                    self.i += 1
                    if tok == ("op", "("):
                        depth += 1
                    elif tok == ("op", ")"):
                        depth -= 1
                        if depth == 0:
                            break
                inner = self.tokens[args_start + 1 : self.i - 1]
                try:
                    return self.call(text, inner)
                except Unresolved:
                    if self.lenient:
                        return ""
                    raise
            try:
                return self.constants.lookup(text, self.cls)
            except Unresolved:
                if self.lenient:
                    return ""
                raise
        raise Unresolved(text)

    def call(self, name: str, inner: list[tuple[str, str]]) -> Any:
        if name in ("String.valueOf", "Long.toString", "Integer.toString") and inner:
            sub = Evaluator(self.constants, self.cls)
            sub.tokens, sub.i = inner, 0
            return java_str(sub.sum())
        units = {
            "TimeUnit.HOURS.toMillis": 3_600_000,
            "TimeUnit.MINUTES.toMillis": 60_000,
            "TimeUnit.SECONDS.toMillis": 1000,
            "TimeUnit.DAYS.toMillis": 86_400_000,
        }
        if name in units:
            sub = Evaluator(self.constants, self.cls)
            sub.tokens, sub.i = inner, 0
            return sub.sum() * units[name]
        if name == "TimeUnit.MILLISECONDS.toHours":
            return self.sub(inner) // 3_600_000
        if name in ("Arrays.asList", "List.of", "Collections.singletonList"):
            items, current = [], []
            depth = 0
            for tok in inner:
                if tok == ("op", ",") and depth == 0:
                    items.append(current)
                    current = []
                    continue
                depth += tok == ("op", "(")
                depth -= tok == ("op", ")")
                current.append(tok)
            if current:
                items.append(current)
            values = []
            for item in items:
                sub = Evaluator(self.constants, self.cls)
                sub.tokens, sub.i = item, 0
                values.append(sub.sum())
            return values
        if name == "Collections.emptyList":
            return []
        if name == "ServerTopicConfigSynonyms.serverSynonym":
            return self.constants.server_synonyms()[self.sub(inner)]
        if name == "String.format":
            values = [self.sub(item) for item in _split_tokens(inner)]
            return java_format(java_str(values[0]), [java_str(v) for v in values[1:]])
        raise Unresolved(name)


def _split_tokens(tokens: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    items: list[list[tuple[str, str]]] = [[]]
    depth = 0
    for tok in tokens:
        if tok == ("op", ",") and depth == 0:
            items.append([])
            continue
        depth += tok == ("op", "(")
        depth -= tok == ("op", ")")
        items[-1].append(tok)
    return items


def java_format(fmt: str, args: list[str]) -> str:
    """Java's String.format for the %s, %n and %1$s a config doc uses."""
    counter = iter(range(len(args)))

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "%n":
            return "\n"
        if m.group(0) == "%%":
            return "%"
        index = int(m.group(1)) - 1 if m.group(1) else next(counter)
        return args[index] if index < len(args) else ""

    return re.sub(r"%(?:(\d+)\$)?\d*[sd]|%n|%%", repl, fmt)


def java_str(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    return str(value)


def split_args(text: str) -> list[str]:
    args, depth, current, i = [], 0, [], 0
    while i < len(text):
        c = text[i]
        if c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            current.append(text[i : j + 1])
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
        else:
            current.append(c)
        i += 1
    if current:
        args.append("".join(current).strip())
    return args


def define_calls(text: str) -> list[list[str]]:
    calls = []
    for m in re.finditer(r"\bdefine\(", text):
        i = m.end()
        depth = 1
        j = i
        while depth:
            c = text[j]
            if c == '"':
                j += 1
                while text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            j += 1
        calls.append(split_args(text[i : j - 1]))
    return calls


IMPORTANCE = {"HIGH", "MEDIUM", "LOW", "Importance.HIGH", "Importance.MEDIUM", "Importance.LOW"}


def render_default(value: Any, config_type: str) -> str | None:
    """The default as DescribeConfigs shows it (ConfigDef.convertToString)."""
    if value is None:
        return None
    if config_type == "LIST":
        if isinstance(value, list):
            return ",".join(java_str(v) for v in value)
        return java_str(value)
    if config_type == "DOUBLE" and isinstance(value, int | float):
        return repr(float(value))
    if config_type == "BOOLEAN" and isinstance(value, str):
        return value.lower()
    return java_str(value)


def extract(calls: list[list[str]], constants: Constants, cls: str, scope: str) -> list[dict]:
    out = []
    for args in calls:
        if len(args) < 5:
            continue
        imp = next((k for k, a in enumerate(args) if a in IMPORTANCE), None)
        if imp is None or imp < 3:
            continue
        ev = Evaluator(constants, cls)
        try:
            name = ev.eval(args[0])
        except Unresolved:
            continue
        config_type = args[1].rpartition(".")[2]
        try:
            default = render_default(Evaluator(constants, cls).eval(args[2]), config_type)
        except Unresolved:
            default = "{" + args[2] + "}"
        validator = args[3] if imp == 4 else None
        if validator == "null":
            validator = None
        doc_expr = args[imp + 1] if imp + 1 < len(args) else '""'
        try:
            doc = Evaluator(constants, cls, lenient=True).eval(doc_expr)
            doc = java_str(doc)
        except Unresolved:
            doc = "{" + doc_expr + "}"
        out.append(
            {
                "name": name,
                "scope": scope,
                "type": config_type,
                "default": default,
                "validator": validator,
                "valid": validator_spec(validator, constants, cls),
                "importance": args[imp].rpartition(".")[2],
                "doc": doc,
            }
        )
    return out


def main() -> None:
    root = Path(sys.argv[1])
    commit = sys.argv[2] if len(sys.argv) > 2 else "unknown"
    constants = Constants(root)
    log_config = (
        root / "storage/src/main/java/org/apache/kafka/storage/internals/log/LogConfig.java"
    )
    text = strip_comments(log_config.read_text())
    start = text.index("CONFIG.", text.index("CONFIG = new LogConfigDef()") + 10)
    chain, _ = until_semicolon(text, start)
    topic = extract(define_calls(chain), constants, "LogConfig", "topic")
    kafka_config = root / "core/src/main/scala/kafka/server/KafkaConfig.scala"
    text = strip_comments(kafka_config.read_text())
    start = text.index("val configDef = {")
    end = text.index("RemoteLogManagerConfig.configDef()", start)
    broker = extract(define_calls(text[start:end]), constants, "KafkaConfig", "broker")
    rlm = root / "storage/src/main/java/org/apache/kafka/server/log/remote/storage"
    rlm = rlm / "RemoteLogManagerConfig.java"
    text = strip_comments(rlm.read_text())
    broker += extract(define_calls(text), constants, "RemoteLogManagerConfig", "broker")
    seen: set[tuple[str, str]] = set()
    rows = []
    for row in topic + broker:
        key = (row["scope"], row["name"])
        if key not in seen:
            seen.add(key)
            rows.append(row)
    out = Path(__file__).with_name("kafka_configs.json")
    out.write_text(
        json.dumps(
            {
                "source": "apache/kafka",
                "tag": "3.8.0",
                "commit": commit,
                "files": [
                    "storage/src/main/java/org/apache/kafka/storage/internals/log/LogConfig.java",
                    "core/src/main/scala/kafka/server/KafkaConfig.scala",
                    "storage/src/main/java/org/apache/kafka/server/log/remote/storage/"
                    "RemoteLogManagerConfig.java",
                ],
                "configs": rows,
            },
            indent=1,
            sort_keys=False,
        )
        + "\n"
    )
    unresolved = [r["name"] for r in rows if (r["default"] or "").startswith("{")]
    print(f"{len(topic)} topic, {len(broker)} broker configs; unresolved defaults: {unresolved}")


def validator_spec(text: str | None, constants: Constants, cls: str) -> list[Any] | None:
    """A validator's source as data: ["at_least", n], ["between", lo, hi], ["in", [...]]."""
    if not text:
        return None
    m = re.fullmatch(r"(?:ConfigDef\.Range\.)?atLeast\((.*)\)", text, re.S)
    try:
        if m:
            return ["at_least", Evaluator(constants, cls).eval(m.group(1))]
        m = re.fullmatch(r"(?:ConfigDef\.Range\.)?between\((.*)\)", text, re.S)
        if m:
            lo, hi = split_args(m.group(1))
            ev = Evaluator(constants, cls)
            return ["between", ev.eval(lo), Evaluator(constants, cls).eval(hi)]
        m = re.fullmatch(r"(?:ConfigDef\.)?(?:ValidList\.|ValidString\.)?in\((.*)\)", text, re.S)
        if m:
            return ["in", [Evaluator(constants, cls).eval(a) for a in split_args(m.group(1))]]
    except (Unresolved, ValueError):
        return None
    return None


if __name__ == "__main__":
    main()
