"""What telemetry is recorded with: the few settings spans and metrics read, as a protocol (``config.Settings`` is
one), so that this folder never imports ``config``, which builds its price table from ``pricing`` here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .pricing import PriceTable


class Recording(Protocol):
    """The settings of one ``instrument()`` that telemetry reads."""

    @property
    def zdr(self) -> bool: ...

    @property
    def prices(self) -> PriceTable | None: ...

    @property
    def chunk_timing(self) -> bool: ...

    @property
    def genai_events(self) -> bool: ...

    @property
    def log_signals(self) -> str: ...

    @property
    def session_id_from_lineage(self) -> bool: ...

    @property
    def latest_semconv(self) -> bool: ...
