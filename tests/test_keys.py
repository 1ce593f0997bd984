"""Settings declared once (mcp_normalizer.keys): the file reader, the variable reader and the docs
all come from the field declarations."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from mcp_normalizer.config import NormalizerConfig, ProxyConfig, Settings
from mcp_normalizer.engine.rules.base import RuleSettings
from mcp_normalizer.errors import ConfigError
from mcp_normalizer.keys import FALSE_WORDS, TRUE_WORDS, spec, variables

from .support import ROOT

pytestmark = pytest.mark.pure


@pytest.mark.parametrize("cls", [ProxyConfig, NormalizerConfig, Settings, RuleSettings])
def test_every_key_is_documented_once_from_its_declaration(cls: type) -> None:
    keys = spec(cls)
    assert keys
    doc = cls.__doc__ or ""
    for name, key in keys.items():
        assert doc.count(f"        {name}: ") == 1, name
        assert key.doc in doc


def test_the_shipped_rule_file_names_only_declared_keys_and_their_defaults() -> None:
    shipped = tomllib.loads((ROOT / "config" / "normalizer.toml").read_text(encoding="utf-8"))
    declared = {**spec(RuleSettings), **spec(NormalizerConfig)}
    defaults = {f.name: f.default for cls in (RuleSettings, NormalizerConfig) for f in dataclasses.fields(cls)}
    assert set(shipped["normalizer"]) <= set(declared)
    for name, value in shipped["normalizer"].items():
        default = defaults[name]  # (TOML has arrays where the settings hold tuples)
        assert value == (list(default) if isinstance(default, tuple) else default), name  # the defaults, unchanged


@pytest.mark.parametrize(
    ("word", "meant"),
    [(w, True) for w in TRUE_WORDS + tuple(w.upper() for w in TRUE_WORDS)] + [(w, False) for w in FALSE_WORDS],
)
def test_one_set_of_boolean_words_for_settings_and_proxy_keys(word: str, meant: bool) -> None:
    env = {"MCP_NORMALIZER_UPSTREAM": "http://127.0.0.1:9/mcp", "MCP_NORMALIZER_REPORT_ONLY": word}
    env |= {"MCP_NORMALIZER_ACCESS_LOG": word, "MCP_NORMALIZER_FORWARDED_HEADERS": word}
    settings = Settings.from_env(env)
    assert settings.report_only is meant
    proxy = settings.load_config().proxy
    assert proxy.access_log is meant and proxy.forwarded_headers is meant


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("MCP_NORMALIZER_REPORT_ONLY", "maybe", "MCP_NORMALIZER_REPORT_ONLY='maybe' must be true or false"),
        ("MCP_NORMALIZER_PORT", "80x", "MCP_NORMALIZER_PORT='80x' must be an integer"),
        ("MCP_NORMALIZER_WORKERS", "0", "MCP_NORMALIZER_WORKERS must be at least 1"),
        ("MCP_NORMALIZER_CONNECT_TIMEOUT", "0", "MCP_NORMALIZER_CONNECT_TIMEOUT must be greater than 0"),
        ("MCP_NORMALIZER_IDLE_TIMEOUT", "nan", "MCP_NORMALIZER_IDLE_TIMEOUT must be a finite number"),
        ("MCP_NORMALIZER_MAX_CONNECTIONS", "1_000", "MCP_NORMALIZER_MAX_CONNECTIONS='1_000' must be an integer"),
        ("MCP_NORMALIZER_WORKERS", "\uff12", "MCP_NORMALIZER_WORKERS='\uff12' must be an integer"),  # a fullwidth 2
        ("MCP_NORMALIZER_HEAD_TIMEOUT", "3_0", "MCP_NORMALIZER_HEAD_TIMEOUT='3_0' must be a number"),
        ("MCP_NORMALIZER_MIRROR_MAX_BYTES", "abc", "MCP_NORMALIZER_MIRROR_MAX_BYTES='abc' must be an integer"),
        (
            "MCP_NORMALIZER_PROBLEM_META_KEY",
            "not a key!",
            "environment: MCP_NORMALIZER_PROBLEM_META_KEY 'not a key!' is not a valid _meta key",
        ),
    ],
)
def test_a_bad_variable_is_named_with_what_it_must_be(variable: str, value: str, message: str) -> None:
    env = {"MCP_NORMALIZER_UPSTREAM": "http://127.0.0.1:9/mcp", variable: value}
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env).load_config()
    assert str(caught.value) == message


def test_a_flag_wins_over_a_variable_that_would_not_parse() -> None:
    env = {"MCP_NORMALIZER_UPSTREAM": "http://127.0.0.1:9/mcp", "MCP_NORMALIZER_PORT": "eighty"}
    assert Settings.from_env(env, port=8080).port == 8080


def test_lists_from_a_variable_are_comma_separated() -> None:
    env = {"MCP_NORMALIZER_UPSTREAM": "http://127.0.0.1:9/mcp", "MCP_NORMALIZER_ALLOWED_HOSTS": " a.example, b:* ,"}
    assert Settings.from_env(env).load_config().proxy.allowed_hosts == ("a.example", "b:*")


def test_the_variables_are_the_declared_keys() -> None:
    found = variables(Settings, ProxyConfig)
    assert "MCP_NORMALIZER_CONFIG" in found and "MCP_NORMALIZER_CONFIG_FILE" not in found
    assert {"MCP_NORMALIZER_UPSTREAM", "MCP_NORMALIZER_MAX_REQUEST_BYTES", "MCP_NORMALIZER_PUBLIC_URL"} <= found
    assert len(found) == len(spec(Settings)) + len(spec(ProxyConfig))


def test_every_normalizer_key_is_read_from_its_variable_too() -> None:
    """Every ``[normalizer]`` key (the rules' knobs included) has its ``MCP_NORMALIZER_<KEY>``."""
    env = {"MCP_NORMALIZER_UPSTREAM": "http://127.0.0.1:9/mcp"}
    env |= {"MCP_NORMALIZER_MIRROR_MAX_BYTES": "100", "MCP_NORMALIZER_PROBLEM_META_KEY": "example.com/problem"}
    config = Settings.from_env(env).load_config()
    assert config.settings == RuleSettings(problem_meta_key="example.com/problem", mirror_max_bytes=100)
    assert Settings.from_env({"MCP_NORMALIZER_UPSTREAM": "http://127.0.0.1:9/mcp"}).load_config().settings == (
        RuleSettings()
    )
