"""Two ranks meet without a port: nothing listens on MASTER_PORT, the store is a file in a folder only this
user reaches, and xm.rendezvous hands each rank every rank's bytes."""
import os
import socket
import stat

import torch
import torch_xla.core.xla_model as xm

rank = xm.get_ordinal()
got = xm.rendezvous("meet", payload=b"rank %d" % rank + b"\x00\x80" * rank)
assert got == [b"rank 0", b"rank 1\x00\x80"], got
with socket.socket() as s:
    assert s.connect_ex(("127.0.0.1", int(os.environ["MASTER_PORT"]))) != 0, "a store listens on MASTER_PORT"
folder = os.path.dirname(__import__("json").loads(os.environ["TRNSIM_XLA"])["out"] + "/rendezvous")
st = os.stat(folder)
assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
x = torch.ones(64, 64, device=xm.xla_device())
y = x @ x  # a step with priced work (a step of none is refused as unpriceable)
xm.mark_step()
print("met", rank, flush=True)
