"""The broker's store: the durable SQLite store of persistent messages and durable state
(:mod:`.sqlite_store`, behind the :class:`~.store.Store` Protocol the core calls), its
write groups and fault handling, salvage of a damaged file, the temp spool that pages
non-persistent messages out of RAM, and the message encoding both share.

It sits in the broker core's stack above the core's records and api (whose message type
it stores) and below the queue and the broker, which own what is stored. This package's
``__init__`` imports nothing: a module importing a sibling runs no other module of it.
"""
