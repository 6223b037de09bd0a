"""Typed configuration, read from arguments or ``CTXPLUGIN_*`` environment variables.

Nested fields use ``__`` in environment names, e.g. ``CTXPLUGIN_BUDGET__TOTAL=8000`` or
``CTXPLUGIN_HISTORY__BLOCK_SIZE=6``.
"""

from __future__ import annotations

import math
import os
import warnings
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from ctxplugin import _config_errors
from ctxplugin._config_errors import Translated, describe, settings_error, unknown_variables
from ctxplugin._modes import WHOLE_PRESET as WHOLE_PRESET
from ctxplugin._modes import WHOLE_SHARES as WHOLE_SHARES
from ctxplugin._modes import WHOLE_TOTAL as WHOLE_TOTAL
from ctxplugin._modes import mode_defaults, unset_default_total
from ctxplugin._secret_headers import SecretHeaders
from ctxplugin._server_url import SECRET_FIELDS as _SHOWN
from ctxplugin._store_names import CollectionPrefix, SchemaName
from ctxplugin.errors import ConfigError, ConfigWarning

Section = Literal["header", "history", "facts", "summaries"]
SECTIONS: tuple[Section, ...] = ("header", "history", "facts", "summaries")


SECTION_SHARES: dict[Section, float] = {"header": 0.2, "history": 1 / 3, "facts": 0.8 / 3, "summaries": 0.2}
"""What a section not set gets, as a share of the total: 600, 1,000, 800 and 600 of 3,000."""


class _Section(Translated, BaseModel):
    """A section of :class:`ContextConfig`; built on its own, a bad value raises
    :class:`ConfigError` naming the setting's full path (``budget.total``)."""

    model_config = ConfigDict(extra="forbid")
    _path: ClassVar[tuple[str, ...]] = ()

    if not TYPE_CHECKING:  # type checkers keep the typed signature of each section's fields

        def __init__(self, /, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise ConfigError(describe(exc, root=type(self), prefix=self._path, values=data)) from exc

        # Inside ContextConfig a section is validated as a field, not built through __init__:
        # the error then names the environment variable it came from.
        __init__.__pydantic_base_init__ = True


class BudgetConfig(_Section):
    """Token budgets per section of the prepared view.

    Values above 1 are tokens. Values in (0, 1] are shares of the model's context window
    (``context_window``, or the model profile's ``max_input_tokens`` when the host exposes it).
    A section left unset scales with the total (:data:`SECTION_SHARES`), so raising only the
    total gives every section more room.
    """

    _path = ("budget",)

    total: float = 3000
    header: float | None = None
    history: float | None = None
    facts: float | None = None
    summaries: float | None = None
    context_window: int | None = Field(None, gt=0, description="the model's input window in tokens, for budgets given as shares")
    elastic: bool = Field(
        False,
        description=(
            "a system prompt and tool schemas that take over half the total add to it rather "
            "than leave the history less than half (set by mode='whole' when total is not given)"
        ),
    )

    @field_validator("total", *SECTIONS, mode="before")
    @classmethod
    def _number(cls, value: object) -> object:
        return _config_errors.not_bool(value)

    @field_validator("total", *SECTIONS)
    @classmethod
    def _positive(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ConfigError(
                "must be a finite number: a token count above 1, or a share of the context window in (0, 1]"
            )
        if value is not None and value <= 0:
            raise ConfigError(
                "must be positive: a token count above 1, or a share of the context window in (0, 1]"
            )
        return value

    def resolve(self, context_window: int | None = None, *, model: str | None = None) -> dict[str, int]:
        """Budgets in tokens; shares are resolved against ``context_window``, and sections left
        unset against the resolved total. ``model`` (``ContextConfig.model``) is named in the
        error a share without a window raises, which says why it gave none."""
        window = self.context_window or context_window

        def tokens(name: str, value: float) -> int:
            if value > 1:
                return int(value)
            if window is None:
                raise ConfigError(_config_errors.share_without_window(name, value, model))
            return max(1, int(value * window))

        out = {"total": tokens("total", self.total)}
        for name in SECTIONS:
            value = getattr(self, name)
            out[name] = max(1, round(out["total"] * SECTION_SHARES[name])) if value is None else tokens(name, value)
        return out


class SummarizerConfig(_Section):
    """Quotas of the optional background summarizer; tokens count prompt and answer."""

    _path = ("history", "summarizer")

    queue_size: int = Field(256, ge=1, description="pending summaries at most; more are dropped and asked again later")
    session_tokens: int = Field(5000, ge=0, description="summarizer tokens per session")
    daily_tokens: int = Field(50000, ge=0, description="summarizer tokens per UTC day, all sessions")
    artifact_tokens: int = Field(120, ge=8, description="longest summary of one message")
    max_attempts: int = Field(3, ge=1, description="tries per text before the zero-LLM gist is final")


class HistoryConfig(_Section):
    """Progressive compression by age (in exchanges)."""

    _path = ("history",)

    enabled: bool = True
    verbatim_exchanges: int = Field(2, ge=0)
    trimmed_exchanges: int = Field(5, ge=0, description="exchanges up to this age are trimmed, older ones gisted")
    trim_tokens: int = Field(300, ge=20)
    gist_tokens: int = Field(60, ge=8)
    block_size: int = Field(4, ge=1, description="exchanges move between tiers in blocks of this size")
    max_tokens: int | None = Field(None, ge=1, description="tokens the compressed history aims for (default: history + summaries budgets)")
    digest_tokens: int = Field(150, ge=0, description="cap on the note that stands for one condensed block")
    archive_tokens: int = Field(600, ge=0, description="cap on the note that stands for all archived blocks")
    archive_blocks: int = Field(4, ge=1, description="condensed blocks are archived this many at a time")
    solo_exchanges: int | None = Field(None, ge=1, description="over_budget: after this many model turns calling tools with no user message, the history goes whole only while its tool outputs fit solo_tool_tokens")
    solo_tool_tokens: int = Field(1500, ge=0, description="the tool outputs' room for sending the history whole once solo_exchanges is reached")
    compress: Literal["always", "over_budget"] = Field(
        "always",
        description=(
            "always: tiers by age on every call; over_budget: send the history as it is while it "
            "fits its budget, and tier it by age from the first call where it does not"
        ),
    )
    summarizer: SummarizerConfig = Field(default_factory=SummarizerConfig)

    @model_validator(mode="after")
    def _order(self) -> HistoryConfig:
        if self.trimmed_exchanges < self.verbatim_exchanges:
            raise ConfigError(
                f"trimmed_exchanges ({self.trimmed_exchanges}) must be at least verbatim_exchanges "
                f"({self.verbatim_exchanges}): exchanges are trimmed after they stop being verbatim"
            )
        return self


class CASConfig(_Section):
    """Tool outputs into the content-addressable store."""

    _path = ("cas",)

    enabled: bool = True
    passthrough_tokens: int = Field(250, ge=0, description="outputs at or below this pass through unchanged")
    summary_tokens: int = Field(120, ge=30)
    ttl_seconds: float | None = Field(None, gt=0)
    expand_max_tokens: int = Field(2000, ge=100, description="cap on what the expand_ref tool returns")
    error_passthrough_tokens: int = Field(2000, ge=0, description="failed tool outputs at or below this pass through unchanged")
    visibility: Literal["session", "user", "workspace", "tenant"] = Field(
        "session", description="who may read stored outputs besides their own session"
    )


class ToolsConfig(_Section):
    """Names-only tool directory with lazy schema loading."""

    _path = ("tools",)

    directory: Literal["auto", "always", "never"] = "auto"
    min_tools: int = Field(8, ge=1, description="auto mode: use the directory from this many tools")
    min_schema_tokens: int = Field(1500, ge=0, description="auto mode: or from this many schema tokens")
    max_loaded: int = Field(8, ge=1, description="loaded schemas kept per session (LRU)")
    pinned: list[str] = Field(default_factory=list, description="tools always bound with their schemas")
    intent_chars: int = Field(80, ge=0, description="longest one-line intent in the directory (0: names only)")
    directory_max_tokens: int = Field(
        1500, ge=1, description="above this the directory shortens intents, then lists names only"
    )
    binding: Literal["auto", "loaded", "stubs"] = Field(
        "auto",
        description=(
            "loaded: bind the full schemas of the tools the conversation loaded (the bound list grows "
            "as tools are loaded); stubs: bind every tool as a stub (name, open arguments) from the "
            "first call and answer load_tools with the parameters (the bound list never changes, so a "
            "provider's prompt cache keeps serving it); auto: stubs while they fit in "
            "directory_max_tokens, else loaded"
        ),
    )


FactsStrategy = Literal["recent", "important", "balanced"]


class FactsConfig(_Section):
    """Facts ledger."""

    _path = ("facts",)

    enabled: bool = True
    extract: bool = True
    k: int = Field(12, ge=0)
    strategy: FactsStrategy = "balanced"
    half_life_hours: float = Field(24.0, gt=0)
    min_relevance: float = Field(0.0, ge=-1, le=1)
    placement: Literal["tail", "head", "window"] = "tail"
    skip_shown: bool = Field(False, description="leave out facts the view itself shows: those read from a message it "
                             "carries unchanged, or whose statement a user message of it holds word for word")
    mark_outdated: bool = True
    trust_message_authority: bool = Field(
        False,
        description="take an authority mark on a user message (additional_kwargs['ctxplugin']['authority']) above the "
        "ingest's own (user) as given: only where your code, not a client, writes the marks",
    )
    implicit_supersession: bool = Field(
        True,
        description="a statement naming a keyed fact's subject with a conflicting day, time, date, amount, percentage or count of a unit replaces it",
    )
    collection_per_tenant: bool = False
    collection: CollectionPrefix = Field(
        "ctxplugin_facts", description="Chroma collection name prefix (the embedding's identity is appended)"
    )
    embedding: Literal["auto", "static", "hashing", "minilm"] = Field(
        "auto",
        description="default embedding: static (shipped word vectors), hashing (no weights), minilm "
        "(all-MiniLM-L6-v2 sentence vectors: the semantic extra), or auto: static, "
        "except for a Chroma collection already built with the hashing embedding",
    )
    embedding_dims: int = Field(384, ge=32, le=8192, description="size of the hashing embedding")
    hybrid: bool = Field(True, description="fuse the embedding's ranking with a lexical (BM25) one")
    candidates: float = Field(1.5, ge=1, le=20, description="candidates fetched per wanted fact, for re-ranking")
    max_per_message: int = Field(8, ge=0, description="facts extracted from one message at most")


class CacheConfig(_Section):
    """Semantic answer cache (off by default)."""

    _path = ("cache",)

    enabled: bool = False
    threshold: float = Field(0.97, gt=0, le=1)
    ttl_seconds: float = Field(3600, gt=0)
    scope: Literal["session", "user", "global"] = "session"


Mode = Literal["whole", "compact"]
MODES: tuple[Mode, ...] = ("whole", "compact")

class StoresConfig(BaseModel):
    """Bounds on every store operation (see ``docs/reliability.md``)."""

    model_config = ConfigDict(extra="forbid")

    timeout: float = Field(
        5.0, gt=0, le=600, allow_inf_nan=False,
        description=(
            "seconds one store operation may take (connect, pool wait, statement, HTTP request); "
            "a server store that does not answer in time is skipped for the step"
        ),
    )
    retry_after: float = Field(
        1.0, gt=0, le=600, allow_inf_nan=False,
        description=(
            "seconds between background checks of a server store that failed; calls fail fast "
            "until one check succeeds"
        ),
    )


class ContextConfig(Translated, BaseSettings):
    """Everything ctxplugin can be told; every field has a working default.

    ``mode`` chooses the defaults of the fields not set: ``"whole"`` (the default) sends a
    conversation as it was while it fits a 7,500-token budget and compresses it hard from the
    first call where it does not; ``"compact"`` compresses by age from the first call within
    3,000 tokens. A field set explicitly always wins over the mode.
    """

    # hide_input_in_errors: an error pydantic makes of ours (model_validate) would show the
    # data given, chroma_headers' values with it
    model_config = SettingsConfigDict(
        env_prefix="CTXPLUGIN_", env_nested_delimiter="__", extra="forbid", hide_input_in_errors=True
    )

    mode: Mode = Field(
        "whole",
        description=(
            "whole: the conversation as it was while it fits the budget (7,500 tokens), hard "
            "compression from the first call where it does not; compact: compression by age on "
            "every call within 3,000 tokens"
        ),
    )

    model: str | None = Field(None, description="model name, used to pick the tokenizer")
    encoding: str | None = Field(None, description="tiktoken encoding name (overrides model)")
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    history: HistoryConfig = Field(default_factory=HistoryConfig)
    cas: CASConfig = Field(default_factory=CASConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    facts: FactsConfig = Field(default_factory=FactsConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    stores: StoresConfig = Field(default_factory=StoresConfig)
    orphan_tool_results: Literal["raise", "drop", "pair"] = Field(
        "raise",
        description=(
            "a tool result no earlier AI message asked for: raise (InvalidInputError that says how "
            "to repair the thread), drop (leave it out of the view) or pair (put a stand-in AI "
            "call before it); both repairs add a warning to the report"
        ),
    )
    prompt_cache_marks: bool = Field(
        True,
        description=(
            "for a Claude model (langchain-anthropic, or Bedrock Converse's cachePoint blocks), mark "
            "the view's stable ends so that the prompt cache keeps the header and the notes when the "
            "tiers move (create_agent, the LangGraph hooks, as_model; a host that marks its own "
            "messages is left as it is)"
        ),
    )
    path: str = Field(".ctxplugin", description="directory of the embedded stores")
    chroma_url: str | None = Field(None, description="Chroma server URL; embedded Chroma when unset; a user:password in it is sent as Basic auth, never shown")
    chroma_headers: SecretHeaders = Field(
        default_factory=dict,
        description="headers sent on every request to the Chroma server, e.g. its token (x-chroma-token or Authorization: Bearer); the values are never shown",
    )
    chroma_tenant: str | None = Field(None, min_length=1, description="Chroma tenant (the server's default when unset)")
    chroma_database: str | None = Field(None, min_length=1, description="Chroma database (the server's default when unset)")
    postgres_dsn: str | None = Field(None, description="Postgres DSN; embedded SQLite when unset")
    postgres_schema: SchemaName = Field("public", description="Postgres schema holding the ctxplugin tables")

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str | None) -> str | None:
        import tiktoken  # its registry of names is read from the installed plugins, offline
        known = tiktoken.list_encoding_names()
        if value is None or value in known or value.removesuffix("_offline") in known:
            return value
        raise ValueError(f"is not an encoding tiktoken knows; the known ones are {', '.join(sorted(known))}")

    @model_validator(mode="before")
    @classmethod
    def _mode_defaults(cls, data: Any) -> Any:
        return mode_defaults(data)

    @model_validator(mode="after")
    def _default_total(self) -> ContextConfig:
        if over := _config_errors.sections_over_total(self.budget, SECTIONS):
            warnings.warn(over, ConfigWarning, stacklevel=2)
        return unset_default_total(self)

    def __repr_args__(self) -> Any:  # repr and str: the passwords of chroma_url and postgres_dsn are not shown
        return [(k, _SHOWN[k](v) if k in _SHOWN and v else v) for k, v in super().__repr_args__()]
    if not TYPE_CHECKING:  # type checkers keep the typed signature of the fields

        def __init__(self, /, **values: Any) -> None:
            """Read ``values``, then ``CTXPLUGIN_*`` variables for what they leave unset.

            Raises:
                ConfigError: a value is invalid; the message names the environment variable when
                    the value came from one (``CTXPLUGIN_BUDGET__TOTAL``), else the field path
                    (``budget.total``), and says what is allowed.

            Warns:
                ConfigWarning: a ``CTXPLUGIN_*`` variable sets nothing (e.g. ``CTXPLUGIN_BUDGET_TOTAL``
                    for ``CTXPLUGIN_BUDGET__TOTAL``); the warning names the likely spelling.
            """
            environ = dict(os.environ)
            for text in unknown_variables(type(self), environ):
                warnings.warn(text, ConfigWarning, stacklevel=2)
            try:
                super().__init__(**values)
            except ValidationError as exc:
                raise ConfigError(describe(exc, root=type(self), values=values, environ=environ)) from exc
            except SettingsError as exc:  # a variable that holds no valid JSON for a section or list
                raise ConfigError(settings_error(str(exc), root=type(self), environ=environ)) from exc


def facts_settings(config: object) -> FactsConfig:
    """``config`` as the facts' settings: a ``FactsConfig``, the ``facts`` of a ``ContextConfig``, or the defaults for None."""
    if config is None or isinstance(config, (FactsConfig, ContextConfig)):
        return FactsConfig() if config is None else config.facts if isinstance(config, ContextConfig) else config
    raise ConfigError(f"facts settings must be a FactsConfig (or a ContextConfig, whose .facts is taken), got {type(config).__name__}")
