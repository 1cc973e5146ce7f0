"""folio's block hash (src/kv/block_hash.cc) in Python, so that tests can
check the hashes in KV events against what the engine must have computed:
each full block's hash chains from its parent's, starting at the root hash of
the request's cache salt. The events carry the low 64 bits."""
M = (1 << 64) - 1
ROOT_DOMAIN = 0x666F6C696F2D726F
BLOCK_DOMAIN = 0x666F6C696F2D626C


def _fmix_a(x):
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M
    return x ^ (x >> 33)


def _fmix_b(x):
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


class _Mixer:
    def __init__(self, domain, seed):
        self.lo, self.hi = seed[0] ^ domain, seed[1]
        self.absorb(domain)

    def absorb(self, word):
        self.lo = _fmix_a(self.lo ^ word)
        self.hi = _fmix_b((self.hi + word * 0x9E3779B97F4A7C15) & M) ^ _rotl(self.lo, 29)

    def finish(self, length):
        self.absorb(length)
        self.absorb(0x8000000000000001)
        lo = _fmix_a(self.lo ^ _rotl(self.hi, 17))
        return lo, _fmix_b(self.hi ^ lo)


def hash_root(salt: bytes = b""):
    m = _Mixer(ROOT_DOMAIN, (0, 0))
    for i in range(0, len(salt), 8):
        m.absorb(int.from_bytes(salt[i:i + 8], "little"))
    return m.finish(len(salt))


def hash_block(parent, tokens):
    m = _Mixer(BLOCK_DOMAIN, parent)
    m.absorb(parent[0])
    m.absorb(parent[1])
    for i in range(0, len(tokens) - 1, 2):
        m.absorb((tokens[i] & 0xFFFFFFFF) | ((tokens[i + 1] & 0xFFFFFFFF) << 32))
    if len(tokens) % 2:
        m.absorb(tokens[-1] & 0xFFFFFFFF)
    return m.finish(len(tokens))


def chain(tokens, block_size, salt: bytes = b""):
    """The external (64-bit) hashes of every full block of `tokens`."""
    h, out = hash_root(salt), []
    for b in range(len(tokens) // block_size):
        h = hash_block(h, tokens[b * block_size:(b + 1) * block_size])
        out.append(h[0])
    return out
