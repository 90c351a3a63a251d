"""A JAX regression trained data-parallel with pmap on 4 host devices, against the same steps on one device.

Prints JSON: the largest weight difference, and the priced data-parallel step on trn2.48xlarge.
"""
import json
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from trnsim import jax as tjax  # noqa: E402

DEVICES, BATCH, IN, OUT, STEPS, LR = 4, 64, 32, 8, 3, 0.1


def loss(w, x, y):
    return jnp.mean((jnp.tanh(x @ w) - y) ** 2)


def dp_step(w, x, y):
    return w - LR * jax.lax.pmean(jax.grad(loss)(w, x, y), "d")


def one_step(w, x, y):
    return w - LR * jax.grad(loss)(w, x, y)


key = jax.random.PRNGKey(0)
w0 = 0.1 * jax.random.normal(key, (IN, OUT))
batches = [(jax.random.normal(jax.random.PRNGKey(10 + s), (BATCH, IN)),
            jax.random.normal(jax.random.PRNGKey(20 + s), (BATCH, OUT))) for s in range(STEPS)]
step = jax.pmap(dp_step, axis_name="d", in_axes=(0, 0, 0))
w_dp = jnp.stack([w0] * DEVICES)
for x, y in batches:
    w_dp = step(w_dp, x.reshape(DEVICES, -1, IN), y.reshape(DEVICES, -1, OUT))
w_one = w0
for x, y in batches:
    w_one = jax.jit(one_step)(w_one, x, y)
x, y = batches[0]
cost = tjax.cost(step, w_dp, x.reshape(DEVICES, -1, IN), y.reshape(DEVICES, -1, OUT), instance="trn2.48xlarge",
                 world=DEVICES)
print(json.dumps({"devices": len(jax.devices()), "max_diff": float(jnp.max(jnp.abs(w_dp - w_one[None]))),
                  "time_ns": cost.time_ns, "flops": cost.flops, "collectives": cost.collectives,
                  "unpriced": cost.unpriced}))
