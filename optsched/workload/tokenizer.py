"""Pluggable tokenizers and chained block hashes over token ids.

Any object with ``encode(text: str) -> numpy.ndarray | list[int]`` (token ids) is a :class:`Tokenizer`.
The default :class:`ApproxBPETokenizer` is an APPROXIMATION of a byte-pair-encoding tokenizer (GPT-2 /
Llama style), not any real vocabulary: a GPT-2-like regex pre-tokenizer splits the text into pieces
(an optional leading space plus a run of letters/digits/underscore, an optional leading space plus a run
of punctuation, or a run of whitespace), each piece of up to ``max_piece_chars`` characters counts as one
token, and longer pieces are cut into ``chunk_chars``-character tokens (BPE merges rarely produce tokens
longer than ~7 characters). Token counts are therefore estimates; they have NOT been compared with a real
tokenizer here (none is installed). On the LMCache mini-swe-agent inputs it gives ~3.0 characters per
token. Pass a real tokenizer (any object with ``encode``) for exact counts.

Token ids come from a stable hash of the piece (``zlib.crc32`` of its UTF-8 bytes; never Python's
salted ``hash()``), so equal text gives equal ids in every process. Block hashes are CHAINED (hash *i*
identifies tokens ``0 .. (i+1)*block_size``): ``h_i = blake2b(h_{i-1} || ids of block i)`` truncated
to 63 bits, so a prefix match is "longest run of leading equal hashes" (types.py contract).
"""

from __future__ import annotations

import hashlib
import re
import zlib
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["ApproxBPETokenizer", "Tokenizer", "chained_block_hashes", "common_prefix_len"]

_PIECE = re.compile(r" ?\w+| ?[^\w\s]+|\s+(?!\S)|\s+")
_MASK63 = (1 << 63) - 1


@runtime_checkable
class Tokenizer(Protocol):
    """Turns text into token ids (any integer ids; only equality matters for prefix hashing)."""

    def encode(self, text: str): ...


class ApproxBPETokenizer:
    """Documented BPE approximation (see module docstring); deterministic and dependency-free.

    Args:
        max_piece_chars: pieces up to this length are one token (default 7).
        chunk_chars: longer pieces are split into tokens of this many characters (default 4).
    """

    def __init__(self, max_piece_chars: int = 7, chunk_chars: int = 4) -> None:
        if max_piece_chars < 1 or chunk_chars < 1:
            raise ValueError(f"max_piece_chars and chunk_chars must be >= 1, got {max_piece_chars}, {chunk_chars}")
        self.max_piece_chars = max_piece_chars
        self.chunk_chars = chunk_chars

    def pieces(self, text: str) -> list[str]:
        """The token strings of ``text`` (their concatenation is ``text``)."""
        out: list[str] = []
        m, k = self.max_piece_chars, self.chunk_chars
        for p in _PIECE.findall(text):
            if len(p) <= m:
                out.append(p)
            else:
                out.extend(p[i : i + k] for i in range(0, len(p), k))
        return out

    def encode(self, text: str) -> np.ndarray:
        """Token ids, shape ``(n_tokens,)`` uint32: crc32 of each piece's UTF-8 bytes."""
        crc = zlib.crc32
        return np.fromiter((crc(p.encode("utf-8")) for p in self.pieces(text)), dtype=np.uint32)


def chained_block_hashes(token_ids, block_size: int) -> tuple[int, ...]:
    """Chained block hashes of a token-id sequence: ``ceil(n / block_size)`` 63-bit ints (last block may
    be partial). ``h_i = blake2b(h_{i-1}.to_bytes(8) + uint32 ids of block i, digest 8 B) & (2**63-1)``."""
    ids = np.asarray(token_ids, dtype=np.uint32)
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size!r}")
    out: list[int] = []
    prev = b"\x00" * 8
    for start in range(0, ids.size, block_size):
        d = hashlib.blake2b(prev + ids[start : start + block_size].tobytes(), digest_size=8).digest()
        prev = d
        out.append(int.from_bytes(d, "little") & _MASK63)
    return tuple(out)


def common_prefix_len(a, b) -> int:
    """Length of the longest common prefix of two 1-D id sequences."""
    a = np.asarray(a)
    b = np.asarray(b)
    n = min(a.size, b.size)
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n
