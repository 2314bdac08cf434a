"""The records under ``runs/``: a union over ``kind``, and the schema versions each kind is read at."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from tileproof.records.models.bench import BenchRecord
from tileproof.records.models.claims import CLAIMS_SCHEMA_VERSION, ClaimsRecord
from tileproof.records.models.compile import CompileRecord
from tileproof.records.models.run import RunRecord, SessionRecord

READABLE_VERSIONS: dict[str, tuple[int, ...]] = {"claims": (1, CLAIMS_SCHEMA_VERSION)}
"""Record kinds whose schema moved on: kind -> every version this tileproof reads, newest last.
Any other kind is read at ``SCHEMA_VERSION`` only."""


Record = Annotated[
    CompileRecord | RunRecord | SessionRecord | BenchRecord | ClaimsRecord, Field(discriminator="kind")
]
