#!/usr/bin/python3
# mkimatrix.py GGUF_PY GGUF OUT.dat: a legacy-format importance matrix for every 2-D/3-D weight of GGUF,
# random positive values (seed 1), so llama-quantize can make the types that require one.
import sys, struct
sys.path.insert(0, sys.argv[1])
import numpy as np
from gguf import GGUFReader
r = GGUFReader(sys.argv[2])
rng = np.random.default_rng(1)
ents = []
for t in r.tensors:
    if not t.name.endswith(".weight") or len(t.shape) < 2 or "norm" in t.name or t.name == "token_embd.weight":
        continue
    ne0 = int(t.shape[0]); nexp = int(t.shape[2]) if len(t.shape) == 3 else 1
    ents.append((t.name, rng.uniform(0.5, 2.0, ne0 * nexp).astype(np.float32)))
with open(sys.argv[3], "wb") as f:
    f.write(struct.pack("<i", len(ents)))
    for name, v in ents:
        b = name.encode()
        f.write(struct.pack("<i", len(b))); f.write(b)
        f.write(struct.pack("<ii", 1, v.size)); f.write(v.tobytes())
    f.write(struct.pack("<i", 1))
    ds = b"random"
    f.write(struct.pack("<i", len(ds))); f.write(ds)
print(len(ents), "entries")
