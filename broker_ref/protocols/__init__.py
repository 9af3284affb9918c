"""Wire protocols hosted over :mod:`jmspy.broker_ref.core` (plug-ins, as in Artemis: the
core knows nothing of them)."""
