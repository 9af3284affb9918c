"""The error a wrong ``jmspy broker`` configuration raises.

Its own module, below every part of the configuration: the main file's reader
(:mod:`.config`) and the readers of its sections (:mod:`.tls_config`) raise it, and the
reader calls the sections' readers, so it cannot live in either without a cycle."""

from __future__ import annotations

from jmspy.errors import InvalidConfigurationException

__all__ = ["ConfigError"]


class ConfigError(InvalidConfigurationException):
    """The configuration file is wrong; the message names the key and file."""
