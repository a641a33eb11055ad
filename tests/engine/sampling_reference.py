"""Independent reference of ZCode's sampling procedure (zcode/core/generate.h,
"Exact sampling procedure"), written from its documentation. Prints lines
`temperature top_k top_p seed id` for a fixed logits vector."""
import math

MASK = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def sample(logits, temperature, top_k, top_p, seed):
    z = [float(x) / temperature for x in logits]
    order = sorted(range(len(z)), key=lambda i: (-z[i], i))
    if 0 < top_k < len(z):
        order = order[:top_k]
    m = z[order[0]]
    e = [math.exp(z[i] - m) for i in order]
    s = sum(e)
    p = [x / s for x in e]
    if top_p < 1.0:
        cum, cut = 0.0, len(p)
        for i, x in enumerate(p):
            cum += x
            if cum >= top_p:
                cut = i + 1
                break
        order, p = order[:cut], p[:cut]
        s2 = sum(p)
        p = [x / s2 for x in p]
    _, r = splitmix64(seed)
    u = (r >> 11) * 2.0 ** -53
    cum = 0.0
    for i, x in zip(order, p):
        cum += x
        if cum > u:
            return i
    return order[-1]


LOGITS = [1.5, -0.5, 0.25, 2.0, 2.0, -3.0, 0.0, 1.0]  # float32-exact values
for t in (0.5, 1.0, 1.7):
    for k in (0, 1, 3, 20):
        for tp in (1.0, 0.9, 0.5):
            for seed in range(0, 120, 7):
                print(t, k, tp, seed, sample(LOGITS, t, k, tp, seed))
