"""robosuite's import-time notice about a private macro file, kept out of a service's stderr.

robosuite warns on every import that it found no private macro file (`macros_private.py`),
recommends one and names the script that writes it. A bench service's stderr reaches the pytest
item that started it, so the notice showed up under the first failure's captured stderr, where
it read like the failure's cause. The protocol uses robosuite's default macros on purpose;
every other robosuite message still shows.
"""

from __future__ import annotations

import logging

ROBOSUITE_LOGGER = "robosuite_logs"  # robosuite.utils.log_utils.DefaultLogger's name
MACRO_NOTICES = ("No private macro file found!", "It is recommended to use a private macro file",
                 "To setup, run: python ")  # ... robosuite/scripts/setup_macros.py


class _MacroNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(MACRO_NOTICES)


def drop_macro_file_notice() -> None:
    """Before robosuite is imported: drop its macro-file notices (idempotent)."""
    logger = logging.getLogger(ROBOSUITE_LOGGER)
    if not any(isinstance(f, _MacroNotice) for f in logger.filters):
        logger.addFilter(_MacroNotice())
