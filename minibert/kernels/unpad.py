"""Unpadding: run the encoder on the real tokens only, packed back to back.

A padded batch [B, T] spends every embedding, projection and feed-forward matmul on its
padding too. Where padding is heavy (sentence-level batches are often half padding), the
encoder instead gathers the real tokens once into [tokens, ...], runs every layer on them,
and scatters the result back into the grid at the end (ModernBERT's and MosaicBERT's
"unpadding"); `Encoder.unpads` decides when: from `Encoder.UNPAD_FROM` padding on, the threshold
bench/unpad_threshold.py finds (docs/speed-measured.md#unpad). Where padding is light, the padded
grid pays as well and is simpler. The default runs on segment pairs (bert, albert) never come
here: their examples run to the full length but for BERT's short ones. The default runs on full
sentences (roberta, electra, distilbert) come here for most of their batches: an example ends
where the next whole sentence would not fit, and the batch is cut to its longest.

Attention is the one layer that needs sequences back: the Triton kernel reads the packed
tokens directly (FlashAttention's "varlen" interface: `cu_seqlens` marks where each sequence
starts), and the padded backends re-pad one bucket of similar lengths at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..attention import attend

ATTENTION_BUCKETS = 4  # length groups the padded backends pad separately


@dataclass
class AttentionBucket:
    """Sequences of similar length, padded together only to the longest of them.

    torch's attention kernels on the CPU want a padded [rows, max_seqlen] grid and spend the
    full max_seqlen² per row even where the key mask hides it. Grouping sequences by length
    before padding cuts that waste (docs/speed.md#where-the-speed-comes-from).
    """

    num_tokens: int
    index: torch.Tensor  # each of the bucket's packed tokens: its slot in [rows * max_seqlen]
    key_mask: torch.Tensor  # [rows, max_seqlen] bool, True = real token

    def pad(self, packed: torch.Tensor) -> torch.Tensor:
        """[bucket tokens, ...] -> [rows, max_seqlen, ...], zeros at padding."""
        return scatter_rows(packed, self.index, *self.key_mask.shape)

    def unpad(self, grid: torch.Tensor) -> torch.Tensor:
        return grid.flatten(0, 1).index_select(0, self.index)


@dataclass
class TokenLayout:
    """Where the real tokens of a padded [batch, seq_len] grid sit.

    Packed tensors hold the real tokens of all sequences back to back, longest sequence
    first: [total_tokens, ...]. `cu_seqlens` ([batch + 1], int32) holds where each sequence
    starts in that list. `grid_index` is each real token's slot in the padded grid
    [batch * seq_len]. Because the longest come first, the `buckets` are consecutive runs of
    the packed tokens, of sizes `bucket_sizes`.
    """

    batch_size: int
    seq_len: int
    max_seqlen: int
    cu_seqlens: torch.Tensor
    grid_index: torch.Tensor
    buckets: list[AttentionBucket]

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor) -> "TokenLayout":
        mask = attention_mask.bool()
        batch_size, seq_len = mask.shape
        lengths, order = mask.sum(dim=1).sort(descending=True, stable=True)
        max_seqlen = int(lengths[0]) if batch_size else 0
        cu_seqlens = F.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
        slots = order[:, None] * seq_len + torch.arange(seq_len, device=mask.device)
        grid_index = slots[mask[order]]  # row by row in length order; handles left padding too
        nonempty = lengths[lengths > 0]
        buckets = [_bucket(group) for group in nonempty.tensor_split(ATTENTION_BUCKETS) if len(group)]
        return cls(batch_size, seq_len, max_seqlen, cu_seqlens, grid_index, buckets)

    @property
    def bucket_sizes(self) -> list[int]:
        return [bucket.num_tokens for bucket in self.buckets]

    def pack(self, grid: torch.Tensor) -> torch.Tensor:
        """[batch, seq_len, ...] -> [total_tokens, ...]: keep the real tokens only."""
        return grid.flatten(0, 1).index_select(0, self.grid_index)

    def unpack(self, packed: torch.Tensor) -> torch.Tensor:
        """[total_tokens, ...] -> [batch, seq_len, ...], zeros at padding."""
        return scatter_rows(packed, self.grid_index, self.batch_size, self.seq_len)

    def attend(self, qkv: torch.Tensor, backend: str, dropout_p: float) -> torch.Tensor:
        """Packed qkv [tokens, 3, heads, d] -> each token's attention output [tokens, heads, d],
        attending within its own sequence only."""
        if backend == "triton":  # the kernel reads packed tokens: no padding at all
            from .flash_attention import flash_attention  # the function, from its module

            return flash_attention(*qkv.unbind(1), self.cu_seqlens, self.max_seqlen, dropout_p=dropout_p)
        if not self.buckets:  # not one real token: nothing to attend to
            return qkv[:, 0]
        outputs = []
        for part, bucket in zip(qkv.split(self.bucket_sizes), self.buckets):
            q, k, v = (t.transpose(1, 2) for t in bucket.pad(part).unbind(2))  # each [rows, heads, max_seqlen, d]
            outputs.append(bucket.unpad(attend(q, k, v, bucket.key_mask, backend, dropout_p).transpose(1, 2)))
        return torch.cat(outputs)


def _bucket(lengths: torch.Tensor) -> AttentionBucket:
    """A bucket of sequences with these (descending) lengths, packed back to back."""
    key_mask = torch.arange(int(lengths[0]), device=lengths.device) < lengths[:, None]
    return AttentionBucket(int(lengths.sum()), key_mask.flatten().nonzero().squeeze(1), key_mask)


# Moving rows by an index: index_select / index_copy rather than `grid[index]` and
# `grid[index] = rows`. Same result, but the general indexing kernels (and their backward,
# which accumulates) cost more on the CPU for these row gathers (docs/speed.md#what-is-left).
def scatter_rows(packed: torch.Tensor, index: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """[n, ...] -> a [rows, cols, ...] grid holding packed[i] at flat slot index[i], zeros elsewhere."""
    out = packed.new_zeros(rows * cols, *packed.shape[1:]).index_copy(0, index, packed)
    return out.view(rows, cols, *packed.shape[1:])
