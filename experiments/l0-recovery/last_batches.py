# Where each run of issue 42 ends in the shuffled training data: the batches of its last K steps,
# as length ranks (python3 experiments/l0-recovery/last_batches.py; no data needed).
# Batches are sorted by length (data::make_batches), so a batch's index is its length rank (0 =
# shortest of 244); data::epoch_order(seed, epoch) is replicated here (std::mt19937_64,
# Fisher-Yates; epochs count from 0 in the trainer).

MASK = (1 << 64) - 1
class MT64:
    def __init__(self, seed):
        self.mt = [0] * 312; self.mt[0] = seed & MASK
        for i in range(1, 312):
            self.mt[i] = (6364136223846793005 * (self.mt[i-1] ^ (self.mt[i-1] >> 62)) + i) & MASK
        self.i = 312
    def __call__(self):
        if self.i >= 312:
            for k in range(312):
                x = (self.mt[k] & 0xFFFFFFFF80000000) | (self.mt[(k+1) % 312] & 0x7FFFFFFF)
                xa = x >> 1
                if x & 1: xa ^= 0xB5026F5AA96619E9
                self.mt[k] = self.mt[(k + 156) % 312] ^ xa
            self.i = 0
        y = self.mt[self.i]; self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK
def epoch_order(n, seed, epoch):
    order = list(range(n))
    rng = MT64((seed * 1000003 + epoch * 7919 + 17) & MASK)
    for i in range(n - 1, 0, -1):
        j = rng() % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order
# check the generator: the 10000th output of mt19937_64 with the default seed 5489
g = MT64(5489)
for _ in range(9999): g()
assert g() == 9981545732273789042, "mt19937_64 replica is wrong"
N = 244
def last(seed, end_step, k):
    out = []
    for step in range(end_step - k + 1, end_step + 1):
        epoch, pos = (step - 1) // N, (step - 1) % N  # the trainer counts epochs from 0
        out.append(epoch_order(N, seed, epoch)[pos])
    return out
runs = [  # name, seed, last step, dev BP
    ("l0mask-rw-ft-72-1x (train route)", 1, 1200, 0.954),
    ("l0mask-rw-ft-36-1x (train route)", 1, 1200, 0.947),
    ("rewind-72-1x", 1, 1200, 0.958),
    ("kd-fix-72-1x", 1, 1200, 0.944),
    ("control all-l0", 1, 1200, 0.959),
    ("exact-72-1x (recipe)", 1, 1657, 0.918),
    ("exact-36-1x (recipe)", 1, 1744, 0.880),
    ("l0mask-rw-ft-72-1x-s2 (train route)", 2, 1200, 0.965),
    ("exact-72-1x-s2 (recipe)", 2, 1656, None),
]
print("mean length rank (0 shortest .. 243 longest) of the batches of the last K steps")
print("%-38s %6s" % ("run", "dev BP") + "".join("%8s" % ("K=%d" % k) for k in (10, 25, 50, 100, 244)))
for name, seed, end, bp in runs:
    cells = []
    for k in (10, 25, 50, 100, 244):
        b = last(seed, end, k)
        cells.append("%8.1f" % (sum(b) / len(b)))
    print("%-38s %6s" % (name, "-" if bp is None else "%.3f" % bp) + "".join(cells))
