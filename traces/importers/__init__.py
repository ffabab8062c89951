"""The registry of trace file formats."""

from __future__ import annotations

from traces.importers.base import ImportedRun, Importer, ImportFormatError
from traces.importers.inspect import InspectImporter
from traces.importers.openai_jsonl import OpenAIJsonlImporter
from traces.importers.otlp import OtlpImporter

IMPORTERS: dict[str, type[Importer]] = {
    OpenAIJsonlImporter.format: OpenAIJsonlImporter,
    InspectImporter.format: InspectImporter,
    OtlpImporter.format: OtlpImporter,
}


class UnknownFormatError(ValueError):
    def __init__(self, fmt: str):
        known = ", ".join(sorted(IMPORTERS))
        super().__init__(f"unknown trace format {fmt!r}; known formats: {known}")
        self.format = fmt


def importer_for(fmt: str) -> Importer:
    """An importer instance for the format, or UnknownFormatError listing the known ones."""
    try:
        return IMPORTERS[fmt]()
    except KeyError:
        raise UnknownFormatError(fmt) from None


__all__ = [
    "IMPORTERS",
    "ImportFormatError",
    "ImportedRun",
    "Importer",
    "UnknownFormatError",
    "importer_for",
]
