"""Prompt templates: one readable file per decision under prompts/, versioned by its first line."""

from __future__ import annotations

import functools
import re
import string
from dataclasses import dataclass
from importlib import resources

_VERSION_LINE = re.compile(r"#\s*version:\s*(\S+)\s*$")
# Any spelling of a data-block delimiter inside KG text, so it cannot close or open a block.
_DELIMITER = re.compile(r"<\s*(/?\s*data)", re.IGNORECASE)


@dataclass(frozen=True)
class Template:
    """A prompt template: `$name` placeholders (string.Template), so JSON braces in the text need no escaping."""

    name: str
    version: str
    text: str

    @property
    def ident(self) -> str:
        """`name@version`, the part of the cache key that changes when the wording changes."""
        return f"{self.name}@{self.version}"

    def render(self, **variables: object) -> str:
        """The prompt with every variable inserted as inert data (delimiters in values are neutralized)."""
        try:
            return string.Template(self.text).substitute({k: escape(v) for k, v in variables.items()})
        except KeyError as missing:
            raise ValueError(f"prompt template {self.name!r} needs variable {missing}") from None


def escape(value: object) -> str:
    """`value` as text that cannot break out of a `<data>` block."""
    return _DELIMITER.sub(r"&lt;\1", str(value))


def parse(name: str, source: str) -> Template:
    """A template from file text whose first line is `# version: N`."""
    first, _, body = source.partition("\n")
    match = _VERSION_LINE.match(first.strip())
    if match is None:
        raise ValueError(f"prompt template {name!r} must start with a '# version: N' line")
    return Template(name, match.group(1), body.strip() + "\n")


@functools.cache
def load(name: str) -> Template:
    """The packaged template `prompts/<name>.txt`."""
    path = resources.files("kgr.backbone").joinpath("prompts").joinpath(f"{name}.txt")
    if not path.is_file():
        raise ValueError(f"no prompt template named {name!r}")
    return parse(name, path.read_text(encoding="utf-8"))
