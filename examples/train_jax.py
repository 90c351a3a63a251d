"""A JAX regression trained data-parallel with pmap on every device JAX sees, as for `trnsim jax`.

    trnsim jax --devices 4 --instance trn2.48xlarge examples/train_jax.py OUT.npz

Saves the first weights, the batches and every device's final weights in OUT.npz.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

BATCH, IN, OUT, STEPS, LR = 64, 32, 8, 3, 0.1
devices = len(jax.devices())


def loss(w, x, y):
    return jnp.mean((jnp.tanh(x @ w) - y) ** 2)


def dp_step(w, x, y):
    return w - LR * jax.lax.pmean(jax.grad(loss)(w, x, y), "d")


w0 = 0.1 * jax.random.normal(jax.random.PRNGKey(0), (IN, OUT))
xs = [jax.random.normal(jax.random.PRNGKey(10 + s), (BATCH, IN)) for s in range(STEPS)]
ys = [jax.random.normal(jax.random.PRNGKey(20 + s), (BATCH, OUT)) for s in range(STEPS)]
step = jax.pmap(dp_step, axis_name="d")
w = jnp.stack([w0] * devices)
for x, y in zip(xs, ys):
    w = step(w, x.reshape(devices, -1, IN), y.reshape(devices, -1, OUT))
np.savez(sys.argv[1], w0=np.asarray(w0), xs=np.stack(xs), ys=np.stack(ys), w=np.asarray(w), lr=LR)
