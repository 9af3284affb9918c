# cython: language_level=3
"""Typed interface of jmspy._cext.vm_convert (the compiled twin of
jmspy.transports.vm_convert).

Beside the module's .pyi, where Cython finds it by qualified name (setup.py passes the
repository root as include path). After editing, touch cython_ext/vm_convert.pyx.
"""


cpdef tuple dest_key(object destination)
cpdef object to_destination(object kind, str name)
cpdef object to_server_message(object message, object connection_id)
cpdef list to_client_messages(list messages, object first_tag, list counts)
