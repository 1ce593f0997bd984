"""The docs stay true: every page reachable, every link resolving, every example valid (each
``mcp-normalizer`` command parses with the command's own parsers, each rule file loads, each
Python block compiles, each JSON, TOML and YAML block parses), the tables made from the code match
it, ``mkdocs build --strict`` passes, and the README stays short and starts with the two commands."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from mcp_normalizer.check.command import _parser as check_parser
from mcp_normalizer.cli import _demo_parser, _proxy_parser, _stdio_parser
from mcp_normalizer.config import NormalizerConfig, ProxyConfig, Settings
from mcp_normalizer.engine import host_tables
from mcp_normalizer.engine.rules import RULES, RuleSettings
from mcp_normalizer.errors import ConfigError
from mcp_normalizer.keys import variables
from mcp_normalizer.ops.refusals import CAUSES

from .support import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
RULE_FILE_TABLES = {"normalizer", "rules", "tools", "proxy", "clients"}


def nav() -> list[str]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return [next(iter(entry.values())) for entry in config["nav"]]


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def blocks(language: str) -> list[tuple[str, str]]:
    """Every fenced block of ``language`` in the docs and the README: (where, text)."""
    found: list[tuple[str, str]] = []
    for path in [README, *pages()]:
        text = path.read_text(encoding="utf-8")
        found.extend((path.name, m[2]) for m in FENCE.finditer(text) if m[1] == language)
    assert found, f"no {language} block: the pattern is wrong"
    return found


def commands() -> list[tuple[str, list[str]]]:
    """Each ``mcp-normalizer`` command of the sh blocks, continuation lines joined, comments cut;
    a synopsis (``[--flag]``, ``...``) is not a command."""
    found = []
    for where, text in blocks("sh"):
        for line in text.replace("\\\n", " ").splitlines():
            for part in line.split(" && "):
                words = shlex.split(part, comments=True)
                while words and re.match(r"[A-Z_]+=", words[0]):  # VAR=value before the command
                    words.pop(0)
                synopsis = any("..." in word or word.startswith("[") for word in words)
                if words and words[0].endswith("mcp-normalizer") and not synopsis:
                    found.append((where, words[1:]))
    return found


@pytest.mark.pure
def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    assert sorted(nav()) == sorted(p.name for p in pages())


@pytest.mark.pure
def test_every_relative_link_of_the_docs_and_the_readme_resolves() -> None:
    for path in [README, *pages()]:
        for target in LINK.findall(path.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+://", target) or target.startswith("#"):
                continue
            assert (path.parent / target.split("#")[0]).is_file(), (path.name, target)


@pytest.mark.pure
def test_the_readme_is_short_starts_with_the_two_commands_and_links_every_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) < 15_000
    first = FENCE.search(text)
    assert first is not None and text.index(first[0]) < 40
    assert first[2].splitlines() == [
        "./scripts/bootstrap && .venv/bin/mcp-normalizer demo       # set up, run the main job on the built-in example",
        "./scripts/bootstrap && .venv/bin/python -m pytest          # set up, run the tests",
    ]
    linked = {target.removeprefix("docs/") for target in LINK.findall(text)}
    assert set(nav()) - {"index.md"} <= linked


@pytest.mark.pure
def test_every_command_in_the_docs_parses() -> None:
    found = commands()
    assert len(found) >= 10
    for where, args in found:
        try:
            if args[:1] == ["check"]:
                check_parser().parse_args(args[1:])
            elif args[:1] == ["demo"]:
                _demo_parser().parse_args(args[1:])
            elif args[:1] == ["stdio"]:
                _stdio_parser().parse_args(args[1 : args.index("--")])
            else:
                _proxy_parser().parse_args(args[: args.index("--")] if "--" in args else args)
        except SystemExit as exc:
            raise AssertionError(f"{where}: mcp-normalizer {shlex.join(args)} does not parse") from exc


@pytest.mark.pure
def test_every_variable_the_docs_name_is_one_the_proxy_reads() -> None:
    known = variables(Settings, ProxyConfig, NormalizerConfig, RuleSettings)  # [normalizer] keys are variables too
    for path in [README, *pages()]:
        named = set(re.findall(r"MCP_NORMALIZER_[A-Z_]*[A-Z]", path.read_text(encoding="utf-8")))
        # the tests' own (tests/support.py), and where the demo and the tests find the Node clients
        extra = {"MCP_NORMALIZER_SHARED", "MCP_NORMALIZER_REQUIRE_SHARED", "MCP_NORMALIZER_NODE_DIR"}
        assert named - known - extra == set(), path.name


@pytest.mark.pure
def test_every_rule_file_in_the_docs_loads(tmp_path: Path) -> None:
    rule_files = 0
    for where, text in blocks("toml"):
        parsed = tomllib.loads(text)  # a TOMLDecodeError names the place
        if set(parsed) <= RULE_FILE_TABLES:
            path = tmp_path / "rules.toml"
            path.write_text(text, encoding="utf-8")
            try:
                NormalizerConfig.from_file(path)
            except ConfigError as exc:
                raise AssertionError(f"{where}: a rule file that does not load: {exc}") from exc
            rule_files += 1
    assert rule_files >= 2


@pytest.mark.pure
def test_every_python_json_and_yaml_block_is_valid() -> None:
    for where, text in blocks("python"):
        compile(text, where, "exec")
    for where, text in blocks("json"):
        for value in _json_values(text):
            assert isinstance(value, dict | list), where
    for _, text in blocks("yaml"):
        yaml.safe_load(text)


def _json_values(text: str) -> list[object]:
    """A block holds one JSON value, or several one after another (a before and an after)."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(text, at)
        values.append(value)
    return values


@pytest.mark.pure
def test_the_rule_reference_lists_every_rule_and_its_default() -> None:
    text = (DOCS / "rules.md").read_text(encoding="utf-8")
    table = text.split("| rule | fault kind", 1)[1].split("\n\n", 1)[0]
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `([a-z_]+)` \|[^|]*\| ([^|]*) \|", table, re.MULTILINE)}
    assert set(rows) == {rule.name for rule in RULES}
    for rule in RULES:
        default = rows[rule.name].strip("* ").split(",")[0].split(" (")[0]
        assert default == rule.default.value, (rule.name, rows[rule.name])


@pytest.mark.pure
def test_the_troubleshooting_table_lists_every_refusal_with_its_status_and_setting() -> None:
    text = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    table = text.split("| cause | status |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \| (\d+) \| ([^|]+) \| ([^|]+) \|$", table, re.MULTILINE)
    assert [key for key, *_ in rows] == list(CAUSES)
    for key, status, meaning, setting in rows:
        cause = CAUSES[key]
        assert (int(status), meaning.strip()) == (cause.status, cause.meaning)
        assert setting.strip() == (f"`{cause.setting}` (`{cause.env}`)" if cause.setting else "—")


@pytest.mark.pure
def test_the_host_tables_are_the_ones_generated_from_hosts_toml() -> None:
    """README.md's and docs/rules.md's host and model-API tables are rendered from the packaged
    facts (``scripts/host-tables --write`` after a change to ``mcp_normalizer/hosts.toml``)."""
    texts = {path: (ROOT / path).read_text(encoding="utf-8") for path, _, _ in host_tables.TABLES}
    for path, text in host_tables.rendered(texts).items():
        assert text == texts[path], f"{path}: a host table differs from hosts.toml (scripts/host-tables --write)"
    for path, name, render in host_tables.TABLES:
        assert f"{host_tables.begin(name)}\n\n{render()}\n\n<!-- end generated -->" in texts[path]
    assert (
        "| Gemini CLI (`gemini-cli`) | `gemini-cli-mcp-client` | `host_schemas`: below version 0.1.13"
        in texts["docs/rules.md"]
    )


@pytest.mark.wire
def test_mkdocs_builds_the_site_strictly(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    run = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    built = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("index.html")}
    expected = {"index.html"} | {f"{name.removesuffix('.md')}/index.html" for name in nav() if name != "index.md"}
    assert expected <= built
