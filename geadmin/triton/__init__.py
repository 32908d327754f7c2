"""Talking to Triton (layer 1).

- client.py        what geadmin asks of Triton (tritonclient), over HTTP or gRPC: the one facade
- connection.py    how each call travels: transport, timeout, thread, the admin key on restricted calls
- silence.py       a Triton that takes connections but answers nothing: asked once, then held
- translate.py     one translation table from tritonclient's exceptions to geadmin's errors
- client_cache.py  a bounded cache of clients, the least recently used closed on eviction
- pools.py         closing a thread pool whose workers each own a connection
- tensors.py       request and response tensors to and from numpy
- servers.py       which Triton servers the dashboard and CLI know about
- logs.py          Triton's log: where it is, how its lines parse, what it says per model
"""
